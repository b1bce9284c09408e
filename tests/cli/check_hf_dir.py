#!/usr/bin/python3
"""Checks a `tessera export --hf` directory with Debian's python3 alone (json + the tests' own
safetensors reader, no transformers): config.json holds the fields and values transformers reads
for the family, and model.safetensors holds exactly the tensors GPT2LMHeadModel / LlamaForCausalLM
expect, by name and shape (derived here from the HF modelling code, independently of Tessera's
mapping), all F32. With --same-values FILE, every tensor equals FILE's (a `tessera export --out`
of the same checkpoint: bare GPT-2 names) bit for bit.

  check_hf_dir.py DIR --expect key=value ... [--same-values FILE.safetensors]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mpi"))
from compare_safetensors import load  # noqa: E402

REQUIRED = {
    "gpt2": ["model_type", "architectures", "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
             "activation_function", "layer_norm_epsilon", "tie_word_embeddings", "torch_dtype"],
    "llama": ["model_type", "architectures", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "hidden_act", "max_position_embeddings", "rms_norm_eps",
              "rope_theta", "rope_scaling", "attention_bias", "mlp_bias", "tie_word_embeddings", "torch_dtype"],
}
FIXED = {
    "gpt2": {"architectures": ["GPT2LMHeadModel"], "activation_function": "gelu_new", "torch_dtype": "float32"},
    "llama": {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "rope_scaling": None,
              "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32"},
}


def expected_tensors(c):
    """{name: shape} of the model's state dict as transformers saves it (tied lm_head left out)."""
    out = {}
    if c["model_type"] == "gpt2":
        C, F, V, T = c["n_embd"], c["n_inner"], c["vocab_size"], c["n_positions"]
        p = "transformer."
        out[p + "wte.weight"] = [V, C]
        out[p + "wpe.weight"] = [T, C]
        for i in range(c["n_layer"]):
            h = f"{p}h.{i}."
            out.update({h + "ln_1.weight": [C], h + "ln_1.bias": [C],
                        h + "attn.c_attn.weight": [C, 3 * C], h + "attn.c_attn.bias": [3 * C],  # Conv1D (in, out)
                        h + "attn.c_proj.weight": [C, C], h + "attn.c_proj.bias": [C],
                        h + "ln_2.weight": [C], h + "ln_2.bias": [C],
                        h + "mlp.c_fc.weight": [C, F], h + "mlp.c_fc.bias": [F],
                        h + "mlp.c_proj.weight": [F, C], h + "mlp.c_proj.bias": [C]})
        out[p + "ln_f.weight"] = [C]
        out[p + "ln_f.bias"] = [C]
    else:
        C, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
        NH, NKV = c["num_attention_heads"], c["num_key_value_heads"]
        HD = C // NH
        out["model.embed_tokens.weight"] = [V, C]
        for i in range(c["num_hidden_layers"]):
            h = f"model.layers.{i}."
            out.update({h + "input_layernorm.weight": [C],
                        h + "self_attn.q_proj.weight": [NH * HD, C], h + "self_attn.k_proj.weight": [NKV * HD, C],
                        h + "self_attn.v_proj.weight": [NKV * HD, C], h + "self_attn.o_proj.weight": [C, NH * HD],
                        h + "post_attention_layernorm.weight": [C],
                        h + "mlp.gate_proj.weight": [F, C], h + "mlp.up_proj.weight": [F, C],
                        h + "mlp.down_proj.weight": [C, F]})
        out["model.norm.weight"] = [C]
    if not c["tie_word_embeddings"]:
        out["lm_head.weight"] = [c["vocab_size"], C]
    return out


def parse_value(v):
    try:
        return json.loads(v)
    except json.JSONDecodeError:
        return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--expect", nargs="*", default=[], help="config.json key=value (JSON values)")
    ap.add_argument("--same-values", help="safetensors file whose tensors must be bitwise equal")
    a = ap.parse_args()
    with open(os.path.join(a.dir, "config.json")) as f:
        c = json.load(f)
    family = c.get("model_type")
    if family not in REQUIRED:
        sys.exit(f"FAIL: model_type {family!r}")
    missing = [k for k in REQUIRED[family] if k not in c]
    if missing:
        sys.exit(f"FAIL: config.json lacks {missing}")
    for k, v in list(FIXED[family].items()) + [kv.split("=", 1) for kv in a.expect]:
        v = parse_value(v) if isinstance(v, str) and k not in FIXED[family] else v
        if c.get(k) != v:
            sys.exit(f"FAIL: config.json {k} = {c.get(k)!r}, expected {v!r}")
    with open(os.path.join(a.dir, "generation_config.json")) as f:
        json.load(f)

    tensors = load(os.path.join(a.dir, "model.safetensors"))  # F32 only, or it fails
    want = expected_tensors(c)
    got = {n: s for n, (s, _) in tensors.items()}
    if got != want:
        extra = sorted(set(got) - set(want))
        lacking = sorted(set(want) - set(got))
        wrong = sorted(n for n in set(got) & set(want) if got[n] != want[n])
        sys.exit(f"FAIL: tensors differ from what {FIXED[family]['architectures'][0]} expects: extra {extra}, "
                 f"missing {lacking}, wrong shape {[(n, got[n], want[n]) for n in wrong]}")
    if a.same_values:
        ref = load(a.same_values)
        for name, (shape, values) in tensors.items():
            bare = name[len("transformer."):] if name.startswith("transformer.") else name
            if bare not in ref or ref[bare][1].tobytes() != values.tobytes():
                sys.exit(f"FAIL: {name} is not bitwise equal to {bare} of {a.same_values}")
    print(f"{a.dir}: {family} config.json and {len(tensors)} tensors as transformers expects"
          + (", bitwise equal to " + a.same_values if a.same_values else ""))


if __name__ == "__main__":
    main()
