"""The PRU's parameters, checked once, and the stream payloads its parts share."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from ...contracts.ema import EXPERT_BITS, LAYER_BITS, MASK_BITS
from ...contracts.pru import LOGIT_BITS, SCORE_BITS, WEIGHT_BITS, PruError, TokenClass, length_bits

__all__ = ["PruParams", "bits_for", "pick_register_for", "PRU_MAX_TOKENS", "PRU_LOGIT_LANES",
           "PRU_TREE_LEVELS_PER_CYCLE"]

#: the longest prompt: the bundled prefill encoder's window (golden.policies.prefill.EncoderSettings)
PRU_MAX_TOKENS = 128
#: router logits per input beat (256 bits): the rate that keeps the PRU ahead of the MAC
#: clusters on the bundled model's prefill (docs/blocks/pru.md, "Throughput")
PRU_LOGIT_LANES = 8
#: the deepest selector max tree that meets the 800 MHz platform clock at 28 nm in one cycle
#: with margin: 32 experts' 5 levels synthesized at 809 MHz, then at 798 MHz after unrelated
#: changes (the tree to S the critical path both times), 128 experts' 7 at 634 MHz
#: (docs/blocks/pru.md, "Synthesis")
PRU_TREE_LEVELS_PER_CYCLE = 4


def bits_for(n: int) -> int:
    """Bits that hold 0..n."""
    return max(1, int(n).bit_length())


def tree_depth(n_experts: int) -> int:
    """Levels of the selector's max tree over n_experts entries: ceil(log2(n_experts))."""
    return (n_experts - 1).bit_length()


def pick_register_for(n_experts: int) -> int:
    """The selector's `pick_register` for n_experts: none while the tree is at most
    PRU_TREE_LEVELS_PER_CYCLE deep, else after its first half (floor(depth / 2) levels; the
    second half also decodes the winner into `taken`)."""
    depth = tree_depth(n_experts)
    return 0 if depth <= PRU_TREE_LEVELS_PER_CYCLE else depth // 2


@dataclass(frozen=True)
class PruParams:
    """n_experts, top_k, n_layers, d_model and expert_ffn are the model's (the last two size the
    fetch's mask words); chunk is policies.prefill.chunk; max_tokens the longest prompt (the
    encoder's window); the thresholds are Q.16 (golden.blocks.pru.tau_q16) and the budgets count
    experts, top-1 included; `lanes` router logits arrive per beat (it divides n_experts); an
    EMA step names at most `experts_per_step` whole experts (what the EMA's slots and buffer
    hold: edgexpert.blocks.pru_experts_per_step); `pick_register` > 0 puts a register after
    that many levels of the selector's max tree (a pick then takes two cycles; 0: none,
    `pick_register_for` chooses)."""
    n_experts: int
    top_k: int
    n_layers: int
    d_model: int
    expert_ffn: int
    chunk: int
    max_tokens: int
    tau_major_q16: int
    tau_minor_q16: int
    budget_minor: int
    budget_trivial: int
    lanes: int = 1
    experts_per_step: int = 1
    pick_register: int = 0

    def __post_init__(self):
        for name in ("n_experts", "top_k", "n_layers", "d_model", "expert_ffn", "chunk",
                     "max_tokens", "budget_minor", "budget_trivial", "lanes", "experts_per_step"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        ranges = [("n_experts", 2, 1 << EXPERT_BITS), ("top_k", 1, self.n_experts),
                  ("n_layers", 1, 1 << LAYER_BITS), ("budget_minor", 1, self.top_k),
                  ("budget_trivial", 1, self.budget_minor), ("chunk", 1, self.max_tokens),
                  ("tau_minor_q16", 0, self.tau_major_q16),
                  ("experts_per_step", 1, self.n_experts),
                  ("tau_major_q16", self.tau_minor_q16, (1 << 32) - 1),
                  ("pick_register", 0, tree_depth(self.n_experts) - 1)]
        for name, lo, hi in ranges:
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise ValueError(f"{name} = {value} is out of range: accepted {lo}..{hi}")
        if self.n_experts % self.lanes:
            raise ValueError(f"lanes = {self.lanes} is out of range: accepted divisors of "
                             f"n_experts (= {self.n_experts})")

    @property
    def expert_bits(self) -> int:
        return bits_for(self.n_experts - 1)

    @property
    def length_bits(self) -> int:
        return length_bits(self.max_tokens)

    @property
    def beats_per_token(self) -> int:
        return self.n_experts // self.lanes

    @property
    def pick_bits(self) -> int:
        return bits_for(self.top_k)

    def mask_words(self, channels: int) -> int:
        return -(-channels // MASK_BITS)

    # --- stream payloads -------------------------------------------------------------------
    @property
    def score_layout(self) -> data.StructLayout:
        """One prompt token's score; `length` is the prompt's token count, the same on each."""
        return data.StructLayout({"score": unsigned(SCORE_BITS),
                                  "length": unsigned(self.length_bits)})

    @property
    def logit_layout(self) -> data.ArrayLayout:
        """`lanes` router logits, expert order from lane 0 up."""
        return data.ArrayLayout(signed(LOGIT_BITS), self.lanes)

    @property
    def class_layout(self) -> data.StructLayout:
        """A token's class; on the prompt's `last`, its first bad field (`error`) and whether
        it announced no token at all (`empty`: a length of 0)."""
        return data.StructLayout({"cls": TokenClass, "last": 1, "error": PruError, "empty": 1})

    @property
    def job_layout(self) -> data.StructLayout:
        """One token's work in one phase of one layer (Sequencer -> Selector)."""
        return data.StructLayout({
            "cls": TokenClass,
            "shared": 1,        # the shared-set phase: picks go into S, not out
            "clear": 1,         # the layer's first job: S starts empty
            "picks": unsigned(self.pick_bits),
            "layer": unsigned(LAYER_BITS),
            "chunk_last": 1,    # the token ends its chunk
        })

    @property
    def pick_layout(self) -> data.StructLayout:
        return data.StructLayout({
            "expert": unsigned(self.expert_bits), "logit": signed(LOGIT_BITS),
            "cls": TokenClass, "layer": unsigned(LAYER_BITS), "chunk_last": 1,
            "last": 1,          # the token's last pick
        })

    @property
    def route_layout(self) -> data.StructLayout:
        return data.StructLayout({"cls": TokenClass, "expert": unsigned(self.expert_bits),
                                  "weight": unsigned(WEIGHT_BITS), "last": 1})
