"""Data: sources (mirror or download), prepare, subword tokenizer, token batching."""
