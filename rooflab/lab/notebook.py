"""The notebook's view of `rooflab lab`: each part run once (when its first question is asked),
its answers printed by question id and its figures shown inline. Computes nothing itself."""
from __future__ import annotations

import os

PART_OF = {"B.attention_macs": 3, "B.attention_io": 3, "B.decode_profile": 3,
           "B.cuda_graph_profile": 3, "B.flash_vs_sdpa": 5, "B.flash_analysis": 5,
           "B.flash_decoding": 5, "B.tensor_parallel": 6}


def report(ok: bool, message: str) -> None:
    """A self-check's verdict, as the notebook prints it."""
    print("OK:" if ok else "NOT YET:", message)


class Lab:
    """rooflab's own run of the lab beside the student's, written to ``out_dir`` as `rooflab
    lab` writes it (a part already there with the same options is kept)."""

    def __init__(self, device: str, quick: bool = False, out_dir: str = "rooflab-report",
                 gpu: str | None = None):
        self.device, self.quick, self.out_dir, self.gpu = device, quick, out_dir, gpu
        self.results: dict = {"parts": {}, "answers": {}}

    def part(self, num: int) -> dict:
        if str(num) not in self.results["parts"]:
            from rooflab.lab import run as RUN

            self.results = RUN.run_lab(self.device, parts=(num,), gpu=self.gpu, quick=self.quick,
                                   out_dir=self.out_dir, resume=True)
        return self.results["parts"][str(num)]

    def answer(self, qid: str, *figures: str) -> None:
        """Print rooflab's answer to ``qid`` from this device's numbers; show ``figures``
        (names of the part's plots) inline."""
        entry = self.part(PART_OF.get(qid) or int(qid.split(".")[0]))
        a = self.results.get("answers", {}).get(qid)
        if a is None:
            why = entry.get("reason") or entry.get("error") or "no answer in this run"
            print(f"rooflab ({qid}): not answered here: {why}")
        else:
            print(f"rooflab ({qid}): {a['text']}")
        for name in figures:
            self.figure(name)

    def figure(self, name: str) -> None:
        path = os.path.join(self.out_dir, "figures", f"{name}.png")
        if not os.path.exists(path):
            print(f"(figure {name} was not drawn in this run)")
            return
        try:
            from IPython.display import Image, display
        except ImportError:  # run as a script, outside Jupyter
            print(f"(figure: {path})")
            return
        display(Image(filename=path))
