"""One node id per API operation for schemathesis' tests.

pytest 9 builds a test's node id from its ``originalname`` and its parametrization; schemathesis
4 (``schema.parametrize()``) makes one item per operation with the operation only in ``name``,
so all 44 shared one node id: reports named them alike, ``--lf`` re-ran them all, and the
progress counted them as one (it ended at 97 %). Each gets its operation as its parameter id
again, as with ``pytest.mark.parametrize``. To run one alone select it by keyword, e.g.
``pytest tests/reliability/test_fuzz.py -k "GET and healthz"`` (pytest matches a bracketed
node id only against a collector's direct children, and these are made by schemathesis').
"""

from __future__ import annotations

import pytest
from schemathesis.pytest.plugin import SchemathesisFunction


def pytest_itemcollected(item: pytest.Item) -> None:
    label = getattr(item, "operation_label", None)
    if isinstance(item, SchemathesisFunction) and label and item.nodeid.endswith(item.originalname):
        item._id = item.parent.id.child(item.originalname).with_params(label)  # noqa: SLF001
