"""Studies: what rooflab measures and predicts beyond one op (a layer measured against its
prediction, a whole model generating, a tensor-parallel layer, the attention and fusion sweeps,
part 1's metrics, a user's module). They use the core, measure/, kernels/ and predict.py, and
know nothing of the lab, the report or the CLI."""
