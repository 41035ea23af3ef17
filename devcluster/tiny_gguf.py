"""A tiny llama-architecture GGUF with random weights, written with PyPI's `gguf`, that
llama-server loads and serves: chat/completions (it always answers " ok"), embeddings
(--pooling last) and rerank (--pooling rank reads the last token's hidden state: a
causal model needs no classifier head; its score is meaningless but the endpoint
answers).

Shapes are chosen for what the tests run: head size 32 so every quantized K/V cache type
(block size 32) divides it, and a sentencepiece ("llama") vocabulary with all 256 byte
tokens so any text tokenizes. About 200 KB.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

N_EMBD = 64
N_HEAD = 2  # head size 32
N_HEAD_KV = 1
N_FF = 128
N_LAYER = 2
N_CTX_TRAIN = 4096
# A chatml template, so chat works with and without --jinja.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WORDS = ("hello", "world", "the", "a", "model", "is", "tiny", "ok", "yes", "no")


def _vocab() -> tuple[list[str], list[float], list[int]]:
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [
        gguf.TokenType.UNKNOWN,
        gguf.TokenType.CONTROL,
        gguf.TokenType.CONTROL,
        gguf.TokenType.CONTROL,
        gguf.TokenType.CONTROL,
    ]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    pieces = ["▁", *(chr(c) for c in range(ord("a"), ord("z") + 1)), *(f"▁{w}" for w in WORDS)]
    tokens += pieces
    types += [gguf.TokenType.NORMAL] * len(pieces)
    scores = [0.0] * (len(tokens) - len(pieces)) + [-float(i) for i in range(len(pieces))]
    return tokens, scores, [int(t) for t in types]


def write_tiny_gguf(path: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    tokens, scores, types = _vocab()
    n_vocab = len(tokens)
    head = N_EMBD // N_HEAD
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("llmkube-py tiny test model")
    writer.add_context_length(N_CTX_TRAIN)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    # Random weights would sample random bytes (invalid UTF-8, control tokens), which
    # llama-server's chat output parser refuses. So every embedding carries a large
    # constant in dimension 0, which the small layers cannot drown, and only "▁ok"
    # reads it: the model always says " ok", whatever it is given.
    embd = w(n_vocab, N_EMBD)
    embd[:, 0] = 100.0
    out = w(n_vocab, N_EMBD)
    out[:, 0] = 0.0
    out[tokens.index("▁ok"), 0] = 4.0
    writer.add_tensor("token_embd.weight", embd)
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    writer.add_tensor("output.weight", out)
    for i in range(N_LAYER):
        b = f"blk.{i}"
        writer.add_tensor(f"{b}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"{b}.attn_q.weight", w(N_EMBD, N_EMBD))
        writer.add_tensor(f"{b}.attn_k.weight", w(head * N_HEAD_KV, N_EMBD))
        writer.add_tensor(f"{b}.attn_v.weight", w(head * N_HEAD_KV, N_EMBD))
        writer.add_tensor(f"{b}.attn_output.weight", w(N_EMBD, N_EMBD))
        writer.add_tensor(f"{b}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"{b}.ffn_gate.weight", w(N_FF, N_EMBD))
        writer.add_tensor(f"{b}.ffn_up.weight", w(N_FF, N_EMBD))
        writer.add_tensor(f"{b}.ffn_down.weight", w(N_EMBD, N_FF))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


if __name__ == "__main__":
    import sys

    print(write_tiny_gguf(Path(sys.argv[1] if len(sys.argv) > 1 else "tiny.gguf")))
