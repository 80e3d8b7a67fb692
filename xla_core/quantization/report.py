"""The quantizer's report: for every dot_general/convolution, what was chosen and why.

Each entry has the unit id (``dot_general#0``), op name, location, whether it was quantized,
and either the choice (weight bits, granularity, scales; the activation's range, scale and
zero point for static quantization) or the reason it stayed float.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass
class QuantizationReport:
    mode: str
    entries: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def add(self, unit, quantized: bool, reason: str | None = None, **choice) -> None:
        self.entries.append({"id": unit.id, "op": unit.op.name, "location": unit.location,
                             "quantized": quantized, "reason": reason, **choice})

    def entry(self, unit_id: str) -> dict:
        for e in self.entries:
            if e["id"] == unit_id:
                return e
        raise KeyError(f"no op {unit_id} in the report (have: "
                       f"{', '.join(e['id'] for e in self.entries)})")

    @property
    def quantized(self) -> list:
        return [e["id"] for e in self.entries if e["quantized"]]

    def to_json(self) -> str:
        return json.dumps({"mode": self.mode, "ops": self.entries, "notes": self.notes},
                          indent=2)

    def format_table(self) -> str:
        lines = [f"quantization report ({self.mode}): {len(self.quantized)} of "
                 f"{len(self.entries)} ops quantized"]
        for e in self.entries:
            if not e["quantized"]:
                lines.append(f"  {e['id']:<18} float      {e['reason']}  [{e['location']}]")
                continue
            weight = e.get("weight", {})
            text = (f"w {weight.get('bits')}-bit {weight.get('granularity')}, scales "
                    f"{weight.get('scale_min'):.3g}..{weight.get('scale_max'):.3g}")
            activation = e.get("activation")
            if isinstance(activation, dict):
                text += (f"; x scale {activation['scale']:.3g} zp {activation['zero_point']} "
                         f"({activation['method']})")
            elif activation:
                text += f"; x {activation}"
            lines.append(f"  {e['id']:<18} quantized  {text}  [{e['location']}]")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines) + "\n"
