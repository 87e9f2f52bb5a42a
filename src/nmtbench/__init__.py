"""nmtbench: RNN vs Transformer NMT, measured under one protocol."""
