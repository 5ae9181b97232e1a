"""Part 1: matrix multiply as three nested Python loops, with no numpy or torch inside.

Every multiply-accumulate is a Python bytecode sequence on one CPU core: M*K*N MACs, each costing
tens of nanoseconds of interpreter work, which is why torch.matmul (vectorised, multithreaded, or on
a GPU) is five to seven orders of magnitude faster. The contrast is the point of the exercise.
"""
from __future__ import annotations


def matmul(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    """C = A @ B for A (M, K) and B (K, N) given as lists of rows. M*K*N MACs."""
    m, k = len(a), len(a[0]) if a else 0
    if len(b) != k:
        raise ValueError(f"inner dimensions differ: A is ({m}, {k}), B has {len(b)} rows")
    n = len(b[0]) if b else 0
    c = [[0.0] * n for _ in range(m)]
    for i in range(m):
        row_a = a[i]
        row_c = c[i]
        for j in range(n):
            acc = 0.0
            for p in range(k):
                acc += row_a[p] * b[p][j]  # one MAC: read A[i,p], read B[p,j]
            row_c[j] = acc  # write C[i,j] once
    return c
