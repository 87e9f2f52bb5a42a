"""Evaluation: decoding the test sets, sacreBLEU scoring, the comparison table."""
