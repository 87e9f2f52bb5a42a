import torch

from nmtbench.decoding.search import greedy, max_lengths
from nmtbench.models.registry import build_model

V, PAD, BOS, EOS = 20, 0, 2, 3
MODELS = {
    "rnn": {"family": "rnn", "embed_dim": 8, "hidden_dim": 8, "dropout": 0.0},
    "transformer": {"family": "transformer", "d_model": 8, "heads": 2, "layers": 1, "d_ff": 16, "dropout": 0.0},
}


def sources():
    g = torch.Generator().manual_seed(5)
    rows = [torch.randint(4, V, (n,), generator=g).tolist() for n in (3, 7, 1, 5, 6)]
    return rows


def padded(rows):
    width = max(map(len, rows))
    src = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
    return src, src != PAD


def test_max_lengths_is_a_times_source_length_plus_b():
    _, mask = padded([[5, 6, 7], [5]])
    assert max_lengths(mask, 1.5, 2).tolist() == [6, 3]


def test_greedy_output_of_a_sentence_is_independent_of_its_batch():
    for name, block in MODELS.items():
        torch.manual_seed(0)
        model = build_model(name, block, V, PAD).eval()
        rows = sources()
        src, mask = padded(rows)
        together = greedy(model, src, mask, BOS, EOS, max_lengths(mask, 2.0, 3))
        for row, expected in zip(rows, together):
            alone_src, alone_mask = padded([row])
            assert greedy(model, alone_src, alone_mask, BOS, EOS, max_lengths(alone_mask, 2.0, 3)) == [expected]
        assert all(len(h) <= 2 * len(r) + 3 for h, r in zip(together, rows))


def test_greedy_takes_the_argmax_at_every_step():
    torch.manual_seed(0)
    model = build_model("t", MODELS["transformer"], V, PAD).eval()
    src, mask = padded([sources()[1]])
    (hyp,) = greedy(model, src, mask, BOS, EOS, torch.tensor([6]))
    state = model.init_state(model.encode(src, mask), mask)
    y, expected = torch.tensor([BOS]), []
    for _ in range(6):
        log_probs, state = model.decode_step(state, y)
        y = log_probs.argmax(-1)
        if y.item() == EOS:
            break
        expected.append(y.item())
    assert hyp == expected
