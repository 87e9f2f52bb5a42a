import json
import subprocess
import sys
from pathlib import Path

import pytest

from nmtbench.evaluation.scoring import score

HYPOTHESES = ["The cat sat on the mat.", "a dog runs"]
REFERENCES = ["The cat sat on a mat.", "The dog runs fast."]


def sacrebleu_cli(tmp_path, hypotheses, references):
    """Score with the sacrebleu command line, the reference implementation users will compare against."""
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("\n".join(hypotheses) + "\n")
    ref.write_text("\n".join(references) + "\n")
    cli = Path(sys.executable).with_name("sacrebleu")
    out = subprocess.run([str(cli), str(ref), "-i", str(hyp), "-m", "bleu", "chrf", "-f", "json", "-w", "2"],
                         check=True, capture_output=True, text=True).stdout
    bleu, chrf = json.loads(out)
    return bleu, chrf


def test_identical_corpus_scores_100():
    result = score(REFERENCES, REFERENCES)
    assert result["bleu"] == 100.0
    assert result["chrf"] == 100.0


def test_matches_sacrebleu_command_line(tmp_path):
    bleu, chrf = sacrebleu_cli(tmp_path, HYPOTHESES, REFERENCES)
    result = score(HYPOTHESES, REFERENCES)
    assert result == {
        "bleu": bleu["score"],
        "chrf": chrf["score"],
        "bleu_signature": bleu["signature"],
        "chrf_signature": chrf["signature"],
    }
    assert "case:mixed" in result["bleu_signature"] and "tok:13a" in result["bleu_signature"]


def test_known_small_case():
    # Figures from `sacrebleu ref.txt -i hyp.txt -m bleu chrf -w 2`, pinned so a change of default shows up here.
    result = score(HYPOTHESES, REFERENCES)
    assert isinstance(result["bleu"], float)
    assert (result["bleu"], result["chrf"]) == (36.99, 57.62)


def test_bleu_is_cased():
    assert score(["the cat sat on the mat ."], ["The cat sat on the mat ."])["bleu"] < 100.0


def test_length_mismatch_is_one_clear_line():
    with pytest.raises(ValueError, match="cannot score 2 hypotheses against 1 references") as error:
        score(HYPOTHESES, REFERENCES[:1])
    assert "\n" not in str(error.value)


def test_empty_corpus_is_refused():
    with pytest.raises(ValueError, match="nothing to score"):
        score([], [])
