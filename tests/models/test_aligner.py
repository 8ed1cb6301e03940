"""The duration decoder's aligner: the beta-binomial prior, the forward-sum loss, the monotonic
alignment search and the durations ↔ alignment round trip, on hand-built cases whose answer is
known."""
import numpy as np
import torch

from myxtts.models.aligner import (
    MASKED,
    durations_to_alignment,
    forward_sum_loss,
    hard_alignment,
    log_beta_binomial_prior,
)


def _diagonal_logp(durations, n_frames, n_text, sharp=5.0):
    """log-probabilities (1, Tm, Tt) that favour the path with these durations."""
    align = durations_to_alignment(torch.tensor([durations]), n_frames)  # (1, Tm, Tt)
    return torch.log_softmax(sharp * align[:, :, :n_text], dim=-1)


def test_search_recovers_the_path_the_scores_favour():
    durations = [3, 1, 4, 2, 5]
    logp = _diagonal_logp(durations, 15, 5)
    path = hard_alignment(logp, torch.tensor([5]), torch.tensor([15]))
    assert path.sum(dim=1).tolist() == [durations]
    assert torch.equal(path, durations_to_alignment(torch.tensor([durations]), 15))


def test_search_is_monotonic_covers_every_token_and_respects_lengths():
    # Scores that would rather skip tokens and go backwards: the path may not.
    g = torch.Generator().manual_seed(0)
    logp = torch.log_softmax(torch.randn(2, 40, 12, generator=g) * 4, dim=-1)
    token_lens, mel_lens = torch.tensor([12, 7]), torch.tensor([40, 25])
    logp[1, :, 7:] = MASKED
    path = hard_alignment(logp, token_lens, mel_lens)
    for b, (n, t) in enumerate(zip(token_lens.tolist(), mel_lens.tolist())):
        assert path[b, :t].sum(dim=1).eq(1).all()  # one token per valid frame
        assert path[b, t:].sum() == 0 and path[b, :, n:].sum() == 0  # nothing in the padding
        tokens = path[b, :t].argmax(dim=1)
        steps = tokens[1:] - tokens[:-1]
        assert bool(((steps == 0) | (steps == 1)).all())  # in order, one token at a time
        assert tokens[0] == 0 and tokens[-1] == n - 1
        assert (path[b, :t].sum(dim=0)[:n] >= 1).all()  # every token spoken


def test_prior_is_a_distribution_that_walks_the_diagonal():
    token_lens, mel_lens = torch.tensor([10, 6]), torch.tensor([50, 20])
    prior = log_beta_binomial_prior(token_lens, mel_lens, 10, 50).exp()  # (B, Tm, Tt)
    for b, (n, t) in enumerate(zip(token_lens.tolist(), mel_lens.tolist())):
        rows = prior[b, :t, :n]
        assert torch.allclose(rows.sum(dim=1), torch.ones(t), atol=1e-4)
        peak = rows.argmax(dim=1)
        assert peak[0] == 0 and peak[-1] == n - 1
        assert bool((peak[1:] >= peak[:-1]).all())


def test_forward_sum_prefers_a_monotonic_alignment_and_has_finite_gradients():
    durations = [4, 4, 4, 4]
    good = _diagonal_logp(durations, 16, 4)
    bad = _diagonal_logp(durations, 16, 4).flip(1)  # the same rows, in reverse time
    lens = (torch.tensor([4]), torch.tensor([16]))
    assert forward_sum_loss(good, *lens) < forward_sum_loss(bad, *lens) - 1.0

    # A padded batch: the padding's MASKED scores must not poison the gradient.
    logits = torch.randn(2, 16, 6, requires_grad=True)
    token_lens, mel_lens = torch.tensor([6, 3]), torch.tensor([16, 9])
    mask = torch.arange(6)[None, None, :] < token_lens[:, None, None]
    logp = torch.log_softmax(logits.masked_fill(~mask, MASKED), dim=-1).masked_fill(~mask, MASKED)
    loss = forward_sum_loss(logp, token_lens, mel_lens)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()


def test_durations_round_trip():
    d = torch.tensor([[2, 0, 3, 1], [1, 1, 0, 0]])
    align = durations_to_alignment(d, 8)
    assert align.sum(dim=1).long().tolist() == d.tolist()
    assert align[0, :6].sum(dim=1).tolist() == [1.0] * 6 and align[0, 6:].sum() == 0
    assert np.array_equal(align[0, :6].argmax(dim=1).numpy(), [0, 0, 2, 2, 2, 3])
