"""A judge-engine generator without a model, for the tests of the judge loop and what it feeds."""

from __future__ import annotations

from radrank.runtime.generators import Generation


class Scripted:
    """Answers from ``answer(prompt text, params)``: a text, or a :class:`Generation` (to script a cut, an endpoint
    error or a refusal). A chat request's prompt text is its first message's content. ``calls``: the parameters of
    each generate call."""

    kind = backend = "scripted"
    tokenizer = None

    def __init__(self, answer):
        self.answer, self.calls = answer, []
        self.identity = {"model": "scripted", "revision": "1"}

    def params(self, attempt=0, *, max_new_tokens=None, temperature=0.0):
        return {"attempt": attempt, "max_new_tokens": 64, "temperature": temperature}

    def retry_params(self, first):
        return self.params(1, temperature=0.7)

    def generate(self, requests, *, params=None):
        self.calls.append(params)
        out = []
        for r in requests:
            answer = self.answer(r if isinstance(r, str) else r[0]["content"], params)
            out.append(answer if isinstance(answer, Generation) else Generation(text=answer))
        return out
