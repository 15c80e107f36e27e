"""MRScore training (radrank.mrscore_train.trainer) on a tiny random Mistral: the loss is the paper's Eq. 2, the
parameter count is the paper's LoRA, training sees the metric's tokens and pooling, the exported folder scores
through the metric like the trained classifier, runs resume, and nothing is dropped or downloaded silently.

Every expected number is computed here independently (numpy, hand-written prompts, unpadded forwards)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

import tiny_train
from radrank.errors import ConfigError, MissingWeightsError

# --- helpers: independent of the code under test ------------------------------------------------------------


def hand_ids(tokenizer, reference: str, hypothesis: str, prompt) -> list[int]:
    """The input of one pair written out by hand: the tiny template is "<s>[INST] {user} [/INST]</s>"."""
    n = prompt.max_report_words
    user = prompt.prompt_template.replace("{reference}", " ".join(reference.split()[:n]))
    user = user.replace("{hypothesis}", " ".join(hypothesis.split()[:n]))
    return tokenizer(f"<s>[INST] {user} [/INST]</s>", add_special_tokens=False)["input_ids"]


def eq2(r_chosen, r_rejected, margin) -> float:
    """−mean log σ(r_c − r_r − m), in numpy."""
    d = np.asarray(r_chosen, float) - np.asarray(r_rejected, float) - np.asarray(margin, float)
    return float(np.mean(np.log1p(np.exp(-d))))


def last_token_rewards(decoder, weight, sequences) -> list[float]:
    """Reward of each sequence run alone (no padding at all): last hidden state at the last token @ weight."""
    import torch

    out = []
    with torch.no_grad():
        for ids in sequences:
            h = decoder(input_ids=torch.tensor([ids])).last_hidden_state[0, -1].float()
            out.append(float(h @ weight.float().reshape(-1)))
    return out


def tokenizer_of(base_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)


# --- the loss --------------------------------------------------------------------------------------------------


def test_loss_is_eq2_on_fixed_rewards(settings, prompt, tmp_path):
    """RewardTrainer.compute_loss of the trainer we build, on a model stub with fixed rewards."""
    import torch

    from radrank.mrscore_train.trainer import prepare_trainer

    prep = prepare_trainer(tiny_train.pairs_frame(4), tmp_path, settings(center_rewards_coefficient=0.01), prompt)
    trainer = prep.trainer
    rc, rr, m = [0.3, -1.2, 2.5, 0.0], [0.1, 0.4, -0.5, 0.0], [0.5, 0.1, 1.0, 0.25]
    logits = torch.tensor(rc + rr).reshape(-1, 1)
    stub = lambda **kw: SimpleNamespace(logits=logits)  # noqa: E731
    inputs = {"input_ids": torch.ones(8, 3, dtype=torch.long), "attention_mask": torch.ones(8, 3, dtype=torch.long),
              "margin": torch.tensor(m)}
    center = 0.01 * float(np.mean((np.array(rc) + np.array(rr)) ** 2))
    got = float(trainer.compute_loss(stub, dict(inputs)))
    assert got == pytest.approx(eq2(rc, rr, m) + center, rel=1e-6)
    trainer.args.center_rewards_coefficient = None
    assert float(trainer.compute_loss(stub, dict(inputs))) == pytest.approx(eq2(rc, rr, m), rel=1e-6)
    # the margin matters: without it the number is another one
    assert eq2(rc, rr, m) != pytest.approx(eq2(rc, rr, [0, 0, 0, 0]), rel=1e-3)


def test_first_step_loss_is_eq2_on_independent_rewards(settings, prompt, base_dir, tmp_path):
    """One real training step at learning rate 0 over all pairs: the logged loss equals Eq. 2 on rewards computed
    here from the base model (unpadded, hand-written prompts) and the checkpoint's head, with the pairs' margins."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from radrank.mrscore_train.trainer import train

    pairs = tiny_train.pairs_frame(4, seed=5)
    pairs["margin"] = [0.9, -0.4, 2.0, 0.3]  # distinct margins: a lost or shuffled margin changes the loss
    s = settings(learning_rate=0.0, max_steps=1, per_device_batch_size=4)
    summary = train(pairs, tmp_path, s, prompt)
    logged = json.loads((tmp_path / "train_state.json").read_text())["log_history"][0]["loss"]
    head = load_file(str(tmp_path / "checkpoints" / "checkpoint-1" / "adapter_model.safetensors"))
    weight = head["base_model.model.score.weight"]
    tok = tokenizer_of(base_dir)
    decoder = AutoModelForCausalLM.from_pretrained(str(base_dir), local_files_only=True).eval().get_decoder()
    chosen = [hand_ids(tok, r, h, prompt) for r, h in zip(pairs["reference"], pairs["chosen"])]
    rejected = [hand_ids(tok, r, h, prompt) for r, h in zip(pairs["reference"], pairs["rejected"])]
    expected = eq2(last_token_rewards(decoder, weight, chosen), last_token_rewards(decoder, weight, rejected),
                   pairs["margin"])
    assert summary["global_step"] == 1
    assert logged == pytest.approx(expected, rel=1e-5, abs=1e-6)


# --- inputs: the metric's tokens ---------------------------------------------------------------------------------


def test_training_inputs_are_the_metric_inputs_token_for_token(settings, prompt, base_dir, tmp_path):
    """What TRL trains on is the hand-written prompt's ids: no EOS appended, nothing re-tokenised; the pad token
    occurs in no input and is not the EOS the template ends with."""
    from radrank.mrscore_train.trainer import build_texts, prepare_trainer

    pairs = tiny_train.pairs_frame(4, seed=7)
    prep = prepare_trainer(pairs, tmp_path, settings(), prompt)
    tok = prep.tokenizer
    data = prep.trainer.train_dataset
    expected_c = [hand_ids(tok, r, h, prompt) for r, h in zip(pairs["reference"], pairs["chosen"])]
    expected_r = [hand_ids(tok, r, h, prompt) for r, h in zip(pairs["reference"], pairs["rejected"])]
    assert [list(x) for x in data["chosen_ids"]] == expected_c
    assert [list(x) for x in data["rejected_ids"]] == expected_r
    assert list(data["margin"]) == pytest.approx(pairs["margin"].tolist())
    assert build_texts(tok, pairs["reference"], pairs["chosen"], prompt) == expected_c
    assert all(x[-1] == tok.eos_token_id and x[-2] != tok.eos_token_id for x in expected_c)  # one EOS, the template's
    assert prep.pad_id != tok.eos_token_id
    assert all(prep.pad_id not in x for x in expected_c + expected_r)
    assert prep.trainer.model.config.pad_token_id == prep.pad_id == prep.trainer.data_collator.pad_token_id


def test_pooling_of_the_trained_classifier_is_the_metrics(settings, prompt, base_dir, tmp_path):
    """A padded batch through the classifier TRL trains (its collator, its pad id) gives each sequence's reward at
    its last real token, as an unpadded forward does; with pad = eos (TRL's default) it would not."""
    import torch

    from radrank.mrscore_train.trainer import prepare_trainer

    pairs = tiny_train.pairs_frame(4, seed=9)
    prep = prepare_trainer(pairs, tmp_path, settings(), prompt)
    model = prep.trainer.model.eval()
    with torch.no_grad():  # make the LoRA weights and the head non-trivial
        for name, p in model.named_parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.3)
    data = prep.trainer.train_dataset
    examples = [{"chosen_ids": data[i]["chosen_ids"], "rejected_ids": data[i]["rejected_ids"]} for i in range(4)]
    batch = prep.trainer.data_collator(examples)
    assert (batch["attention_mask"] == 0).any()  # really padded
    sequences = [e["chosen_ids"] for e in examples] + [e["rejected_ids"] for e in examples]
    with torch.no_grad():
        padded = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, 0].tolist()
        alone = [float(model(input_ids=torch.tensor([s])).logits[0, 0]) for s in sequences]
        model.config.pad_token_id = prep.tokenizer.eos_token_id
        eos_padded = model(input_ids=batch["input_ids"].masked_fill(batch["attention_mask"] == 0,
                                                                    prep.tokenizer.eos_token_id),
                           attention_mask=batch["attention_mask"]).logits[:, 0].tolist()
    assert padded == pytest.approx(alone, abs=1e-5)
    assert not np.allclose(eos_padded, alone, atol=1e-3)  # the trap is real in this fixture


# --- parameters ---------------------------------------------------------------------------------------------------


def test_trainable_parameters_are_the_papers_lora(settings, prompt, tmp_path):
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForSequenceClassification, GemmaConfig, MistralConfig

    from radrank.mrscore_train.trainer import _lora_config, lora_trainable_parameters, prepare_trainer

    prep = prepare_trainer(tiny_train.pairs_frame(2), tmp_path, settings(), prompt)
    counted = sum(p.numel() for p in prep.trainer.model.parameters() if p.requires_grad)
    by_hand = 2 * 16 * ((64 + 64) + (64 + 2 * 16)) + 64  # layers·r·(q in+out + v in+out) + head
    assert counted == by_hand == 7232
    assert lora_trainable_parameters(prep.trainer.model.config, 16, ("q_proj", "v_proj")) == by_hand
    assert prep.info["trainable_parameters"] == counted
    trainable = {n for n, p in prep.trainer.model.named_parameters() if p.requires_grad}
    assert all(".lora_A." in n or ".lora_B." in n or "score" in n for n in trainable)
    assert prep.trainer.model.base_model.model.score.original_module.bias is None

    mistral_7b = MistralConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                               num_key_value_heads=8, vocab_size=32000)
    assert lora_trainable_parameters(mistral_7b) == 32 * 16 * (4096 + 4096 + 4096 + 1024) + 4096 == 6_819_840
    gemma_2b = GemmaConfig(hidden_size=2048, num_hidden_layers=18, num_attention_heads=8, num_key_value_heads=1,
                           head_dim=256, intermediate_size=16384, vocab_size=256000)
    assert lora_trainable_parameters(gemma_2b) == 18 * 16 * (2048 + 2048 + 2048 + 256) + 2048 == 1_845_248

    # the real peft model of the 7B shape, on the meta device (no weights), and a tiny one with
    # head_dim ≠ hidden/heads
    s = settings()
    odd = MistralConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                        num_key_value_heads=1, head_dim=32, vocab_size=300)
    for config, expected in ((mistral_7b, 6_819_840), (odd, 3 * 16 * ((64 + 128) + (64 + 32)) + 64)):
        config.num_labels = 1
        with torch.device("meta"):
            model = get_peft_model(AutoModelForSequenceClassification.from_config(config), _lora_config(s))
        assert sum(p.numel() for p in model.parameters() if p.requires_grad) == expected
        assert lora_trainable_parameters(config) == expected


# --- export: the metric's folder -----------------------------------------------------------------------------------


def _frame(pairs):
    import pandas as pd

    refs = list(pairs["reference"]) * 2
    hyps = list(pairs["chosen"]) + list(pairs["rejected"])
    return pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(refs))], "reference": refs, "hypothesis": hyps})


def test_export_scores_through_the_metric_like_the_trained_classifier(trained, base_dir, prompt, tmp_path):
    """The exported folder through radrank.metrics.score("mrscore") gives the trained PEFT classifier's rewards
    (checkpoint loaded as TRL trained it: padded batch, its pad id) and the unpadded forwards' rewards."""
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
    from trl.trainer.reward_trainer import DataCollatorForPreference

    from radrank import metrics
    from radrank.mrscore_train.trainer import build_texts, export_checkpoint

    checkpoint = trained["out"] / "checkpoints" / "checkpoint-3"
    state = json.loads((trained["out"] / "train_state.json").read_text())
    out = export_checkpoint(checkpoint, tmp_path / "model", base_model=str(base_dir), base_revision=None,
                            prompt=prompt, extra={"training": {"step": 3}})

    # the format
    meta = json.loads((out / "mrscore.json").read_text())
    assert meta == {"format": "radrank-mrscore-1", "base_model": str(base_dir), "base_revision": None,
                    "prompt": {"prompt_template": prompt.prompt_template, "chat_template": True,
                               "max_report_words": 60, "max_length": 512},
                    "adapter": "adapter", "head": "reward_head.safetensors", "training": {"step": 3}}
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert config["task_type"] == "CAUSAL_LM" and config["modules_to_save"] is None
    assert config["base_model_name_or_path"] == str(base_dir) and config["r"] == 16
    head = load_file(str(out / "reward_head.safetensors"))
    assert set(head) == {"weight", "bias"} and head["weight"].shape == (1, 64) and head["bias"].shape == (1,)
    assert head["weight"].dtype == torch.float32 and float(head["bias"].abs().sum()) == 0.0
    stored = load_file(str(checkpoint / "adapter_model.safetensors"))
    assert torch.equal(head["weight"], stored["base_model.model.score.weight"].float())
    adapter = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    assert all(".lora_" in k for k in adapter) and len(adapter) == len(stored) - 1

    # peft loads the adapter into the base causal LM, every LoRA weight from the file
    lm = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(base_dir), local_files_only=True),
                                   str(out / "adapter"))
    loaded = dict(lm.named_parameters())
    for key, value in adapter.items():
        name = key.replace(".weight", ".default.weight")
        assert torch.equal(loaded[name], value), key
    assert any(float(v.abs().sum()) > 0 for k, v in adapter.items() if "lora_B" in k)  # trained: B moved from 0

    pairs = tiny_train.pairs_frame(4, seed=11)
    frame = _frame(pairs)
    s = {"model": str(base_dir), "adapter": str(out / "adapter"), "head": str(out / "reward_head.safetensors"),
         "prompt_template": prompt.prompt_template, "max_report_words": prompt.max_report_words,
         "max_length": prompt.max_length, "device": "cpu", "dtype": "fp32", "batch_size": 8, "cache_dir": "off"}
    inference = metrics.score("mrscore", frame, s)["mrscore_reward"].to_numpy()
    base_only = metrics.score("mrscore", frame, {**s, "adapter": None})["mrscore_reward"].to_numpy()

    # the classifier as TRL trained it
    tok = tokenizer_of(base_dir)
    seq = AutoModelForSequenceClassification.from_pretrained(str(base_dir), num_labels=1, local_files_only=True)
    seq = PeftModel.from_pretrained(seq, str(checkpoint)).eval()
    seq.config.pad_token_id = state["pad_token_id"]
    ids = build_texts(tok, frame["reference"], frame["hypothesis"], prompt)
    n = len(ids) // 2
    batch = DataCollatorForPreference(pad_token_id=state["pad_token_id"])(
        [{"chosen_ids": a, "rejected_ids": b} for a, b in zip(ids[:n], ids[n:])])
    with torch.no_grad():
        trained_rewards = seq(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, 0]
        alone = [float(seq(input_ids=torch.tensor([x])).logits[0, 0]) for x in
                 (hand_ids(tok, r, h, prompt) for r, h in zip(frame["reference"], frame["hypothesis"]))]
    assert inference == pytest.approx(trained_rewards.numpy(), abs=1e-5)
    assert inference == pytest.approx(alone, abs=1e-5)
    assert not np.allclose(base_only, inference, atol=1e-3)  # the adapter is really in the metric's model

    from radrank.metrics import mrscore as metric_module

    if hasattr(metric_module, "TRAINED_FILE"):  # the metric reads the folder itself: model = the exported folder
        folder = {"model": str(out), "device": "cpu", "dtype": "fp32", "batch_size": 8, "cache_dir": "off"}
        assert metrics.score("mrscore", frame, folder)["mrscore_reward"].to_numpy() == pytest.approx(inference,
                                                                                                    abs=1e-6)


def test_export_refuses_what_the_metric_could_not_load(trained, base_dir, prompt, tmp_path):
    from safetensors.torch import load_file, save_file

    from radrank.errors import InputError
    from radrank.mrscore_train.trainer import export_checkpoint, verify_adapter

    checkpoint = trained["out"] / "checkpoints" / "checkpoint-3"
    with pytest.raises(ValueError, match="extra may not set"):
        export_checkpoint(checkpoint, tmp_path / "a", base_model=str(base_dir), base_revision=None, prompt=prompt,
                          extra={"head": "x"})
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "adapter_config.json").write_text((checkpoint / "adapter_config.json").read_text())
    state = load_file(str(checkpoint / "adapter_model.safetensors"))
    save_file({k: v for k, v in state.items() if "score" not in k}, str(broken / "adapter_model.safetensors"))
    with pytest.raises(InputError, match="no trained score head"):
        export_checkpoint(broken, tmp_path / "b", base_model=str(base_dir), base_revision=None, prompt=prompt)
    # an adapter whose keys do not fit the causal LM is caught by the verification
    good = export_checkpoint(checkpoint, tmp_path / "c", base_model=str(base_dir), base_revision=None, prompt=prompt)
    adapter = load_file(str(good / "adapter" / "adapter_model.safetensors"))
    save_file({k.replace("base_model.model.model.", "base_model.model.decoder."): v for k, v in adapter.items()},
              str(good / "adapter" / "adapter_model.safetensors"))
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        lm = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(base_dir)))
    with pytest.raises(RuntimeError, match="does not fit the base causal LM"):
        verify_adapter(good / "adapter", lm)


# --- runs ------------------------------------------------------------------------------------------------------------


def test_a_second_call_resumes_from_the_last_complete_checkpoint(settings, prompt, tmp_path):
    from radrank.mrscore_train.trainer import train

    pairs = tiny_train.pairs_frame(8, seed=13)
    first = train(pairs, tmp_path, settings(max_steps=2), prompt)
    assert first["global_step"] == 2 and first["resumed_from"] is None
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    (tmp_path / "checkpoints" / "checkpoint-3").mkdir()  # a save cut short: no weights, no state
    said = []
    second = train(pairs, tmp_path, settings(max_steps=4), prompt, log=said.append)
    assert second["resumed_step"] == 2 and second["resumed_from"].endswith("checkpoint-2")
    assert second["global_step"] == 4
    assert any(line.startswith("resuming from") and "checkpoint-2" in line for line in said)
    state = json.loads((tmp_path / "train_state.json").read_text())
    assert state["resumed_step"] == 2 and state["global_step"] == 4
    steps = [e["step"] for e in state["log_history"] if "loss" in e]
    assert steps == [1, 2, 3, 4]  # the history of the first call carried on
    assert (tmp_path / "checkpoints" / "checkpoint-4" / "adapter_model.safetensors").is_file()
    # another learning rate is another run: refused, not mixed into these checkpoints
    with pytest.raises(ConfigError, match="learning_rate"):
        train(pairs, tmp_path, settings(max_steps=6, learning_rate=3e-4), prompt)


def test_train_state_records_what_the_run_was(trained, base_dir):
    state = json.loads((trained["out"] / "train_state.json").read_text())
    assert state["format"] == "radrank-mrscore-train-1"
    assert state["global_step"] == 3 and state["trainable_parameters"] == 7232
    assert state["expected_trainable_parameters"] == 7232 and state["total_parameters"] > 7232
    assert state["base_model"]["id"] == str(base_dir) and len(state["base_model"]["weights_sha256"]) == 64
    assert {"torch", "transformers", "trl", "peft"} <= set(state["versions"]) and state["versions"]["trl"] == "1.16.0"
    assert [e["step"] for e in state["log_history"] if "loss" in e] == [1, 2, 3]
    assert state["settings"]["lora_r"] == 16 and state["prompt"]["max_length"] == 512
    assert trained["summary"]["final_checkpoint"].endswith("checkpoint-3")


def test_a_missing_base_model_fails_before_anything_is_loaded(settings, prompt, tmp_path, monkeypatch):
    import transformers

    from radrank.mrscore_train.trainer import train

    def never(*args, **kwargs):  # the mechanism, not a clock: the check comes before any load is tried
        raise AssertionError("a model or tokenizer was loaded before the missing weights were reported")

    for cls in (transformers.AutoTokenizer, transformers.AutoConfig, transformers.AutoModelForSequenceClassification,
                transformers.AutoModelForCausalLM):
        monkeypatch.setattr(cls, "from_pretrained", never)
    for name in ("radrank-tests/no-such-mistral", str(tmp_path / "nowhere")):
        with pytest.raises(MissingWeightsError, match=name.replace("/", ".")) as err:
            train(tiny_train.pairs_frame(2), tmp_path / "run", settings(base_model=name), prompt)
        assert "mrscore_training.train.base_model" in str(err.value)
        assert not (tmp_path / "run").exists()


def test_over_long_pairs_are_refused_or_dropped_loudly(settings, prompt, base_dir, tmp_path):
    from radrank.mrscore_train.trainer import prepare_pairs, train

    pairs = tiny_train.pairs_frame(4, seed=17)
    pairs.loc[2, "chosen"] = " ".join(["qzx-kjv"] * 50)  # rare bytes: several tokens a word
    tok = tokenizer_of(base_dir)
    lengths = [max(len(hand_ids(tok, r, c, prompt)), len(hand_ids(tok, r, j, prompt)))
               for r, c, j in zip(pairs["reference"], pairs["chosen"], pairs["rejected"])]
    limit = sorted(lengths)[-2]  # every pair fits but the long one
    assert lengths[2] == max(lengths) > limit
    with pytest.raises(ConfigError, match=rf"1 of 4 training pairs are longer than {limit} tokens.*pair p2, "
                                          rf"{lengths[2]} tokens"):
        prepare_pairs(tok, pairs, settings(max_length=limit), prompt)
    # the prompt's max_length (where the metric cuts) is a limit too
    with pytest.raises(ConfigError, match=rf"longer than {limit} tokens"):
        prepare_pairs(tok, pairs, settings(max_length=512), prompt.replace(max_length=limit))
    summary = train(pairs, tmp_path, settings(max_length=limit, too_long="drop", max_steps=1), prompt)
    assert summary["train_pairs"] == 3 and summary["dropped_too_long"] == 1
    state = json.loads((tmp_path / "train_state.json").read_text())
    assert state["data"]["dropped_too_long"]["train"] == [{"pair_id": "p2", "tokens": lengths[2]}]


def test_settings_are_checked_where_the_config_is_read(base_dir):
    from radrank.mrscore_train.trainer import TrainSettings

    s = TrainSettings.build({})
    assert (s.lora_r, s.lora_alpha, s.target_modules, s.max_length, s.learning_rate) == (16, 32, ("q_proj", "v_proj"),
                                                                                         1024, 1e-4)
    assert s.base_model == "mistralai/Mistral-7B-Instruct-v0.2"
    assert "gpus" not in s.identity() and "device" not in s.identity() and "lora_r" in s.identity()
    for bad, match in (({"gpus": 3}, "gradient_accumulation_steps"), ({"target_modules": []}, "at least one"),
                       ({"too_long": "truncate"}, "too_long"), ({"gradient_checkpointing": "yes"}, "gradient_ch"),
                       ({"lora_rank": 8}, "did you mean lora_r")):
        with pytest.raises(ConfigError, match=match):
            TrainSettings.build(bad, where="mrscore_training.train")
    assert TrainSettings.build({"gradient_checkpointing": True}).gradient_checkpointing is True


def test_the_entry_point_trains_data_parallel_and_exports(base_dir, tmp_path):
    """``python -m radrank.mrscore_train.trainer`` as a job runs it, here under torchrun with 2 CPU processes (gloo):
    parquet in, one summary, checkpoints at the single-process batch, rank 0's files and export."""
    import os
    import subprocess
    import sys

    from radrank.mrscore_train.trainer import launch_command

    tiny_train.pairs_frame(8, seed=19).to_parquet(tmp_path / "train.parquet")
    tiny_train.pairs_frame(2, seed=23).to_parquet(tmp_path / "validation.parquet")
    (tmp_path / "settings.json").write_text(json.dumps(
        {"base_model": str(base_dir), "device": "cpu", "gpus": 2, "epochs": 1, "per_device_batch_size": 2,
         "gradient_accumulation_steps": 2, "max_length": 512, "save_steps": 1}))
    (tmp_path / "prompt.json").write_text(json.dumps({"max_length": 512}))
    args = ["--pairs", tmp_path / "train.parquet", "--validation", tmp_path / "validation.parquet",
            "--out", tmp_path / "run", "--settings", tmp_path / "settings.json", "--prompt", tmp_path / "prompt.json",
            "--export", tmp_path / "model"]
    cmd = launch_command(2, args)
    assert cmd[:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert launch_command(1, args)[:3] == [sys.executable, "-m", "radrank.mrscore_train.trainer"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(printed) == 1  # rank 0 only
    summary = json.loads(printed[0])
    # 8 pairs, 2 processes x 2 pairs, accumulation 2 / 2 = 1: a batch of 4 pairs as on one process -> 2 steps
    assert summary["global_step"] == 2 and summary["epoch"] == 1.0 and summary["train_pairs"] == 8
    assert summary["eval"]["eval_loss"] > 0
    state = json.loads((tmp_path / "run" / "train_state.json").read_text())
    assert state["world_size"] == 2 and state["global_step"] == 2
    assert json.loads((tmp_path / "model" / "mrscore.json").read_text())["training"]["step"] == 2
    assert (tmp_path / "model" / "adapter" / "adapter_model.safetensors").is_file()
    assert "launched with" not in proc.stderr  # gpus = processes
