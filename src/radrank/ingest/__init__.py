"""Inputs → canonical pairs.

Three input formats, detected from the file itself (see :func:`detect_format`):

* ``rexrank_json`` – a ReXrank submission: a JSON object keyed by case id,
  read exactly as ReXrank's json_to_csv does (:mod:`radrank.ingest.rexrank`);
* ``csv`` – a prediction CSV and a ground-truth CSV (study_id, case_id, report),
  joined on study_id (:mod:`radrank.ingest.tables`);
* ``parquet`` – pairs already canonical: sample_id, reference, hypothesis
  (:mod:`radrank.ingest.tables`).

:func:`build_pairs` applies the empty-text policies and returns the pairs table
and the drop table (every sample that was not scored as given, with its reason).
"""

from radrank.ingest.detect import detect_format
from radrank.ingest.pairs import PAIRS_COLUMNS, DROPS_COLUMNS, build_pairs, ingest_submission

__all__ = ["detect_format", "build_pairs", "ingest_submission", "PAIRS_COLUMNS", "DROPS_COLUMNS"]
