"""The proof tools: the classic mistakes, closed forms, Markov chains, the end-to-end simulation,
statistics with power, the exact court and the proof suite."""
