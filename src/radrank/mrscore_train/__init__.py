"""Training MRScore (Liu et al. 2024): the paper's reward-model method, as a workflow stage.

MRScore is a method, not a checkpoint: no code, data or weights were released. This package turns
reference reports into a reward model the ``mrscore`` metric loads, in the paper's seven steps:

1. :mod:`~radrank.mrscore_train.references` — reference reports (findings and impression) from the run's
   datasets or a ReXrank JSON / CSV; a reference without either is listed, not used;
2. :mod:`~radrank.mrscore_train.candidates` — an instruction LLM writes candidates per reference for each
   quality tier, on the judge engines (local, vLLM, an OpenAI-compatible endpoint), seeded;
3. :mod:`~radrank.mrscore_train.candidates` — the MRScore rubric judge grades each candidate; the total is
   recomputed from the 0/1 error vector; empty, unparsed and out-of-tier candidates are listed with why;
4. :mod:`~radrank.mrscore_train.pairs` — every within-reference (better, worse) pair with its margin,
   split train / validation by reference;
5. :mod:`~radrank.mrscore_train.trainer` — TRL's RewardTrainer with a PEFT LoRA sequence classifier, on
   the prompt the metric builds at inference (:func:`radrank.metrics.mrscore.build_inputs`);
6. :mod:`~radrank.mrscore_train.selection` — every checkpoint through the ``mrscore`` metric itself:
   validation pairwise accuracy and agreement with radiologists; the best by Kendall's τ is kept, with a
   model card;
7. the kept model is a folder ``metric_settings.mrscore.model`` names.

:mod:`~radrank.mrscore_train.config` reads the config section ``mrscore_training``;
:mod:`~radrank.mrscore_train.demo` builds the tiny random models of ``make mrscore-demo``. The workflow's jobs
are in :mod:`radrank.mrscore_jobs` (the workflow layer, which this package never imports).
"""
