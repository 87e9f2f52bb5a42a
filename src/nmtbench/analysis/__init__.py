"""The textbook claims about RNNs and Transformers, measured on the project's own models (stage `analyze`)."""
