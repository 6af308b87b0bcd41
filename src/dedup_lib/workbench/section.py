"""What one section of a notebook or report shows: its tables, charts and sentences, in order.

A section is what a library function found in the data, ready to display as a cell's last
expression: tables through :func:`~dedup_lib.workbench.style.styled`, charts through
:func:`~dedup_lib.workbench.figures.show`, sentences as markdown. Where the data cannot say
what a section is about, its one part is the sentence saying so (see
:class:`~dedup_lib.analysis.evidence.Evidence`). Tests read the same parts (:attr:`tables`,
:attr:`sentences`) that a notebook shows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, TypeAlias

import pandas as pd
import plotly.graph_objects as go

from dedup_lib.workbench.figures import show
from dedup_lib.workbench.style import styled

__all__ = ["Section"]

#: A part: a table, a chart, or a sentence in markdown (data in it escaped by whoever wrote it).
Part: TypeAlias = pd.DataFrame | go.Figure | str


@dataclass(frozen=True)
class Section:
    """Parts shown one below the other. ``embed``: charts carry plotly.js, for a report read
    offline (:func:`~dedup_lib.workbench.figures.show`). ``metadata`` goes with each sentence
    and table shown (the report reads its title there)."""

    parts: tuple[Part, ...]
    embed: bool = False
    metadata: dict[str, Any] | None = None

    @classmethod
    def of(cls, *parts: Part | None) -> Section:
        """A section of the parts given, those that are None left out."""
        return cls(tuple(p for p in parts if p is not None))

    def embedded(self, embed: bool = True) -> Section:
        """The same section, its charts written with plotly.js inlined (or not)."""
        return replace(self, embed=embed)

    @property
    def tables(self) -> list[pd.DataFrame]:
        return [p for p in self.parts if isinstance(p, pd.DataFrame)]

    @property
    def figures(self) -> list[go.Figure]:
        return [p for p in self.parts if isinstance(p, go.Figure)]

    @property
    def sentences(self) -> list[str]:
        return [p for p in self.parts if isinstance(p, str)]

    def _ipython_display_(self) -> None:
        from IPython.display import Markdown, display

        for part in self.parts:
            if isinstance(part, str):
                display(Markdown(part), metadata=self.metadata)  # type: ignore[no-untyped-call]
            elif isinstance(part, go.Figure):
                show(part, embed=self.embed)
            else:
                display(styled(part), metadata=self.metadata)  # type: ignore[no-untyped-call]

    def __repr__(self) -> str:
        kinds: dict[type[Any], str] = {str: "sentence", go.Figure: "chart"}
        named = [kinds.get(type(p), "table") for p in self.parts]
        return f"Section({', '.join(named)})"
