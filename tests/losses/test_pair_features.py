"""The softmax / bce feature sets of SBERT's Table 6, chosen by name or written as in the paper."""

from __future__ import annotations

import pytest

from semsearch.errors import SemsearchError
from semsearch.losses import build_loss
from semsearch.losses.pair_head import check_parts

TABLE_6 = {
    "u,v": ("u", "v"),
    "|u-v|": ("abs_diff",),
    "u*v": ("product",),
    "|u-v|,u*v": ("abs_diff", "product"),
    "u,v,u*v": ("u", "v", "product"),
    "u,v,|u-v|": ("u", "v", "abs_diff"),
    "u, v, |u-v|, u*v": ("u", "v", "abs_diff", "product"),
}


@pytest.mark.parametrize(("written", "parts"), TABLE_6.items())
def test_every_feature_set_of_the_paper_is_accepted_as_written(written, parts) -> None:
    assert check_parts(written) == parts
    assert check_parts(list(parts)) == parts


def test_the_classifier_reads_as_many_features_as_chosen(tiny_encoder) -> None:
    loss = build_loss("softmax", tiny_encoder, num_labels=3, parts="|u-v|,u*v")
    assert loss.classifier.in_features == 2 * tiny_encoder.dimension


def test_an_unknown_feature_set_is_one_line(tiny_encoder) -> None:
    with pytest.raises(SemsearchError, match="objective 'softmax': unknown pair features u\\+v"):
        build_loss("softmax", tiny_encoder, num_labels=3, parts="u+v")
    with pytest.raises(SemsearchError, match="unknown pair features \\(none\\)"):
        build_loss("bce", tiny_encoder, parts=[])
