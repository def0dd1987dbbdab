from __future__ import annotations

import numpy as np

from semsearch.evaluation.similarity import paired_similarities, row_cosines


def test_row_cosines_compare_each_row_with_its_partner_only() -> None:
    a = np.array([[3.0, 0.0], [0.0, 2.0], [0.0, 0.0]], dtype=np.float32)
    b = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    cosines = row_cosines(a, b)
    assert cosines.dtype == np.float64
    np.testing.assert_allclose(cosines, [1.0, np.sqrt(0.5), 0.0], atol=1e-12)
    np.testing.assert_array_equal(paired_similarities(a, b)["cosine"], cosines)
