"""The model zoo: real torchvision, timm and Hugging Face architectures at small sizes.

    from frameworks.torch.models.zoo import ZOO, build_zoo_model
    model, inputs = build_zoo_model("tv_resnet18")    # random weights (seeded), in eval mode
    ZOO.get("tv_resnet18").library                    # "torchvision"

Each entry is the library's own model definition with random weights and small inputs
(batch 2; images 64x64 with 10 classes unless an architecture needs more; text of 16
tokens on the d=64 configs of ``frameworks.torch.models.build``); nothing is downloaded.
Dropout and stochastic depth are off, so a training step is deterministic and any backend
can be compared with eager. Entries with ``heldout=True`` are the held-out set: other
architectures of the same libraries, registered after the zoo's results were in and never
tuned for (``zoo_names(heldout=True)``, ``openhlo bench --zoo --heldout``). ``openhlo
bench --zoo`` (tools/bench/zoo.py) runs them; a model whose library is missing raises
ImportError from ``build_zoo_model``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from frameworks.torch.models import HELDOUT
from stablehlo.registry import Registry

BATCH, IMAGE, CLASSES = 2, 64, 10


@dataclass(frozen=True)
class ZooModel:
    name: str
    library: str                            # "torchvision", "timm" or "transformers"
    make: Callable[[], tuple]               # () -> (module, example inputs)
    heldout: bool = False                   # in the held-out set, not the zoo


ZOO: Registry[ZooModel] = Registry("zoo model")


def _images(size: int = IMAGE) -> tuple:
    return (torch.randn(BATCH, 3, size, size),)


def _torchvision(name: str, arch: str, size: int = IMAGE, heldout: bool = False,
                 **kwargs) -> None:
    def make():
        from frameworks.torch.models.vision import import_torchvision
        torchvision = import_torchvision()
        model = getattr(torchvision.models, arch)(weights=None, num_classes=CLASSES, **kwargs)
        for module in model.modules():  # some builders fix the rate: turn it off afterwards
            if isinstance(module, torchvision.ops.StochasticDepth):
                module.p = 0.0
        return model, _images(size)
    ZOO.register(name, ZooModel(name, "torchvision", make, heldout))


def _timm(name: str, arch: str, size: int = IMAGE, heldout: bool = False, **kwargs) -> None:
    def make():
        from frameworks.torch.models.vision import import_timm
        model = import_timm().create_model(arch, pretrained=False, num_classes=CLASSES,
                                           drop_rate=0.0, **kwargs)  # drop paths: off by default
        return model, _images(size)
    ZOO.register(name, ZooModel(name, "timm", make, heldout))


def _transformers(name: str, heldout: bool = False) -> None:
    def make():
        from frameworks.torch.models import build
        return build(name)
    ZOO.register(f"hf_{name}", ZooModel(f"hf_{name}", "transformers", make, heldout))


def _tiny_vit():
    """torchvision's ViT class at ViT-Tiny's width, 4 layers, 16x16 patches of 64x64 images."""
    from frameworks.torch.models.vision import import_torchvision
    vit = import_torchvision().models.VisionTransformer(
        image_size=IMAGE, patch_size=16, num_layers=4, num_heads=3, hidden_dim=192,
        mlp_dim=768, num_classes=CLASSES)
    return vit, _images()


_torchvision("tv_resnet18", "resnet18")
_torchvision("tv_resnet50", "resnet50")
_torchvision("tv_resnext50_32x4d", "resnext50_32x4d")
_torchvision("tv_mobilenet_v2", "mobilenet_v2", dropout=0.0)
_torchvision("tv_mobilenet_v3_small", "mobilenet_v3_small", dropout=0.0)
_torchvision("tv_efficientnet_b0", "efficientnet_b0", dropout=0.0)
_torchvision("tv_squeezenet1_1", "squeezenet1_1", dropout=0.0)
_torchvision("tv_shufflenet_v2_x0_5", "shufflenet_v2_x0_5")
_torchvision("tv_densenet121", "densenet121")
_torchvision("tv_googlenet", "googlenet", aux_logits=False, init_weights=True, dropout=0.0)
_torchvision("tv_mnasnet0_5", "mnasnet0_5", dropout=0.0)
_torchvision("tv_regnet_y_400mf", "regnet_y_400mf")
_torchvision("tv_convnext_tiny", "convnext_tiny")
_torchvision("tv_swin_t", "swin_t")
ZOO.register("tv_vit_tiny", ZooModel("tv_vit_tiny", "torchvision", _tiny_vit))

_timm("timm_resnet18d", "resnet18d")
_timm("timm_convnext_atto", "convnext_atto")
_timm("timm_vit_tiny", "vit_tiny_patch16_224", img_size=IMAGE)
_timm("timm_deit_tiny", "deit_tiny_patch16_224", img_size=IMAGE)
_timm("timm_efficientnet_b0", "efficientnet_b0")
_timm("timm_mobilenetv3_small_050", "mobilenetv3_small_050")
_timm("timm_regnetx_002", "regnetx_002")
_timm("timm_lcnet_050", "lcnet_050")
_timm("timm_ghostnet_050", "ghostnet_050")

for _name in ("gpt2", "bert", "llama", "t5", "mistral", "qwen2", "opt", "gpt_neox", "roberta",
              "distilbert", "bart", "t5_encoder"):
    _transformers(_name)

# the held-out set
_torchvision("tv_resnet34", "resnet34", heldout=True)
_torchvision("tv_mobilenet_v3_large", "mobilenet_v3_large", heldout=True, dropout=0.0)
_torchvision("tv_regnet_x_400mf", "regnet_x_400mf", heldout=True)
_torchvision("tv_shufflenet_v2_x1_0", "shufflenet_v2_x1_0", heldout=True)
_torchvision("tv_squeezenet1_0", "squeezenet1_0", heldout=True, dropout=0.0)
_torchvision("tv_mnasnet1_0", "mnasnet1_0", heldout=True, dropout=0.0)

_timm("timm_resnet10t", "resnet10t", heldout=True)
_timm("timm_mobilevit_xxs", "mobilevit_xxs", heldout=True)
_timm("timm_rexnet_100", "rexnet_100", heldout=True)
_timm("timm_tinynet_e", "tinynet_e", heldout=True)
_timm("timm_dla46_c", "dla46_c", heldout=True)
_timm("timm_levit_128s", "levit_128s", heldout=True, img_size=IMAGE)
_timm("timm_efficientvit_m0", "efficientvit_m0", heldout=True, img_size=IMAGE)

for _name in HELDOUT:
    _transformers(_name, heldout=True)


def zoo_names(heldout: bool = False) -> list[str]:
    """The zoo's model names, or with ``heldout`` the held-out set's, sorted."""
    return [n for n in ZOO.names() if ZOO.get(n).heldout == heldout]


def build_zoo_model(name: str, seed: int = 0) -> tuple:
    """(model in eval mode with dropout off, example inputs); weights and inputs seeded."""
    torch.manual_seed(seed)
    model, inputs = ZOO.get(name).make()
    for module in model.modules():  # any dropout the constructor arguments did not reach
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
    return model.eval(), inputs
