"""``optimizer="adamw+sgd"``: SGD for the ViT's convolutional tokenizer and AdamW for the rest,
as one optimiser the schedule, the checkpoint and a resumed run treat like any other."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_utils.training.optim import SplitOptimizer, make_optimizer
from course_utils.training.recipes import (
    Recipe,
    apply_overrides,
    build_model,
)

# CPU-heavy: keep the runs on the training tests' worker
pytestmark = pytest.mark.xdist_group("train")

TINY = Recipe(
    name="tiny_airbench",
    model_kwargs=dict(
        img_size=32,
        patch_size=8,
        num_classes=10,
        dim=32,
        depth=1,
        num_heads=2,
        mlp_dim=64,
        stem_channels=(8, 16),
        tokenizer="airbench",
        init="pytorch",
    ),
    epochs=3,
    batch_size=64,
    optimizer="adamw+sgd",
    momentum=0.85,
    lr=1e-3,
    weight_decay=0.05,
    tokenizer_lr=0.1,
    tokenizer_weight_decay=1e-3,
    tokenizer_bias_lr_scale=8.0,
    warmup_epochs=0.5,
    schedule="linear",
    amp="none",
    fast_train=512,
    fast_eval=128,
    fast_epochs=3,
)


def test_each_trainable_parameter_has_one_group_with_its_rate_and_decay():
    torch.manual_seed(0)
    model = build_model(TINY)
    opt = make_optimizer(TINY, model)
    assert isinstance(opt, SplitOptimizer)
    sgd, adamw = opt.parts
    assert isinstance(sgd, torch.optim.SGD) and isinstance(
        adamw, torch.optim.AdamW
    )
    kernels, shifts = sgd.param_groups
    assert (kernels["lr"], kernels["weight_decay"]) == (0.1, 1e-3)
    assert shifts["lr"] == pytest.approx(0.8)
    assert shifts["weight_decay"] == pytest.approx(1e-3 / 8)
    assert kernels["nesterov"] and kernels["momentum"] == 0.85
    # every group a learning-rate schedule must reach is in the shared list, once
    assert opt.param_groups == sgd.param_groups + adamw.param_groups
    seen = [id(p) for g in opt.param_groups for p in g["params"]]
    trainable = [id(p) for p in model.parameters() if p.requires_grad]
    assert sorted(seen) == sorted(trainable)
    conv = {id(p) for p in model.patch_embed.convolutional_parameters()}
    assert {id(p) for g in sgd.param_groups for p in g["params"]} == conv
    # the projection into the Transformer trains with it
    assert id(model.patch_embed.proj.weight) in {
        id(p) for g in adamw.param_groups for p in g["params"]
    }
    # one LambdaLR scales every group from its own starting rate
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.5)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx(
        [0.05, 0.4, 5e-4, 5e-4]
    )
    F.cross_entropy(
        model(torch.randn(4, 3, 32, 32)), torch.arange(4)
    ).backward()
    opt.step()
    sched.step()
    assert all("momentum_buffer" in sgd.state[p] for p in kernels["params"])
    assert all(
        "exp_avg" in adamw.state[p]
        for g in adamw.param_groups
        for p in g["params"]
    )


def test_the_state_reloads_into_a_fresh_optimiser_and_the_schedule_still_reaches_it():
    torch.manual_seed(0)
    model = build_model(TINY)
    opt = make_optimizer(TINY, model)
    F.cross_entropy(
        model(torch.randn(4, 3, 32, 32)), torch.arange(4)
    ).backward()
    opt.step()
    fresh = make_optimizer(TINY, model)
    fresh.load_state_dict(opt.state_dict())
    for a, b in zip(opt.parts, fresh.parts):
        for p in a.state:
            assert all(
                torch.equal(a.state[p][k], b.state[p][k]) for k in a.state[p]
            )
    # the part's new group dicts are the ones a schedule sees
    sched = torch.optim.lr_scheduler.LambdaLR(fresh, lambda step: 0.25)
    assert fresh.parts[0].param_groups[0]["lr"] == pytest.approx(0.025)
    assert fresh.param_groups[0] is fresh.parts[0].param_groups[0]
    del sched
    with pytest.raises(ValueError, match="has 1 parts, this optimiser 2"):
        fresh.load_state_dict({"parts": [opt.state_dict()["parts"][0]]})


def test_a_stopped_run_resumes_to_the_uninterrupted_end(tmp_path):
    from course_utils.training.trainer import train

    quiet = dict(fast=True, log=lambda *_: None)
    whole = train(TINY, tmp_path / "whole", **quiet)
    first = train(TINY, tmp_path / "split", stop_after_s=1e-3, **quiet)
    assert first["epochs_done"] == 1
    rest = train(TINY, tmp_path / "split", stop_after_s=3600, **quiet)
    assert rest["epochs_done"] == whole["epochs_done"] == 3
    assert [h["val_loss"] for h in rest["history"]] == [
        h["val_loss"] for h in whole["history"]
    ]
    assert rest["test_acc"] == whole["test_acc"]


@pytest.mark.parametrize(
    "changes, match",
    [
        (
            dict(optimizer="adamw"),
            "given with optimizer='adamw\\+sgd' and only then",
        ),
        (
            dict(tokenizer_lr=None),
            "given with optimizer='adamw\\+sgd' and only then",
        ),
        (dict(tokenizer_lr=0.0), "must be above 0"),
        (dict(tokenizer_bias_lr_scale=-1.0), "must be above 0"),
    ],
)
def test_a_recipe_that_half_asks_for_the_split_is_refused(changes, match):
    with pytest.raises(ValueError, match=match):
        apply_overrides(TINY, changes)


def test_a_model_without_a_convolutional_tokenizer_is_refused():
    plain = apply_overrides(TINY, {"model_kwargs.tokenizer": "conv"})
    with pytest.raises(ValueError, match="tokenizer='airbench'"):
        make_optimizer(plain, build_model(plain))
