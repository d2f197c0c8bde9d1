"""The verifiers: the chain rule (verify), block verification, sample-and-match, multi-draft trees,
the lossy rules kept for comparison, sampling settings, and the NumPy/torch adapter and exact
draw they share."""
