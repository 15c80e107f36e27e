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
        options = {**(rest[0] if rest else {}), **options}
        return adapter_class(name)(root, **options)
    if isinstance(dataset, str):
        if root is None:
            raise TypeError(f"dataset {dataset!r} needs a root folder")
        return adapter_class(dataset)(root, **options)
    raise TypeError(f"dataset must be an adapter, a (name, root) pair or a name; got {type(dataset).__name__}")


__all__ = ["REGISTRY", "DatasetAdapter", "Sample", "adapter_class", "make_adapter", "names"]
