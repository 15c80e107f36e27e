"""Dataset adapters for generation and VQA: one module per dataset, imported when asked for.

Every adapter follows :class:`radrank.datasets.base.DatasetAdapter`: built from
a dataset root (and options), it yields :class:`~radrank.datasets.base.Sample`
rows (sample id, image paths, reference report or question / answer, indication,
split). Adding a dataset is adding a module and one line in :data:`REGISTRY`
(:class:`radrank.registry.Registry`: a module is imported the first time its adapter is asked for).

``make_adapter("vqa_rad", "/data/vqa-rad", split="test")`` or
``make_adapter(("vqa_rad", "/data/vqa-rad"))`` build one; an adapter instance is
returned unchanged.
"""

from __future__ import annotations

from radrank.datasets.base import DatasetAdapter, Sample
from radrank.registry import Registry

REGISTRY = Registry("dataset", {
    "mimic_cxr": "radrank.datasets.mimic_cxr:MimicCXR",
    "iu_xray": "radrank.datasets.iu_xray:IUXray",
    "chexpert_plus": "radrank.datasets.chexpert_plus:CheXpertPlus",
    "rexgradient": "radrank.datasets.rexgradient:ReXGradient",
    "vqa_rad": "radrank.datasets.vqa_rad:VQARAD",
    "slake": "radrank.datasets.slake:SLAKE",
    "mimic_ext_cxr_qba": "radrank.datasets.mimic_ext_cxr_qba:MimicExtCXRQBA",
})


names = REGISTRY.names
adapter_class = REGISTRY.get  # the DatasetAdapter subclass called ``name`` (a KeyError naming the known ones)


def make_adapter(dataset, root=None, **options) -> DatasetAdapter:
    """An adapter from an instance, a ``(name, root)`` / ``(name, root, options)`` tuple, or a name and root."""
    if isinstance(dataset, DatasetAdapter):
        if root is not None or options:
            raise TypeError("an adapter instance takes no root or options")
        return dataset
    if isinstance(dataset, (tuple, list)):
        if not 2 <= len(dataset) <= 3:
            raise TypeError("a dataset tuple is (name, root) or (name, root, options)")
        name, root, *rest = dataset
        if rest and not isinstance(rest[0], dict):
            raise TypeError(f"a dataset tuple's options are a dict of option names to values, not "
                            f"{type(rest[0]).__name__}")
        options = {**(rest[0] if rest else {}), **options}
        return _build(name, root, options)
    if isinstance(dataset, str):
        if root is None:
            raise TypeError(f"dataset {dataset!r} needs a root folder")
        return _build(dataset, root, options)
    raise TypeError(f"dataset must be an adapter, a (name, root) pair or a name; got {type(dataset).__name__}")


def _build(name: str, root, options: dict) -> DatasetAdapter:
    """The adapter ``name`` over ``root``; an option its class does not take is a ConfigError naming it and the
    options it does take (not Python's "unexpected keyword argument")."""
    import inspect

    from radrank.errors import ConfigError

    cls = adapter_class(name)
    params = inspect.signature(cls.__init__).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        taken = [p for p, spec in params.items() if p not in ("self", "root")
                 and spec.kind in (spec.POSITIONAL_OR_KEYWORD, spec.KEYWORD_ONLY)]
        unknown = [k for k in options if k not in taken]
        if unknown:
            raise ConfigError(f"dataset {name}: unknown option(s) {unknown}; {name} takes "
                              f"{', '.join(taken) or 'no options'}")
    return cls(root, **options)


__all__ = ["REGISTRY", "DatasetAdapter", "Sample", "adapter_class", "make_adapter", "names"]
