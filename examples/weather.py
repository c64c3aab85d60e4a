"""Three tools for seed 001's question, with made-up data: a file you can hand to ``--tools``.

    tao run "北京和上海哪个城市今天更适合户外跑步？" --tools examples/weather.py --agent react-text
    tao run "Is Chengdu or Hangzhou better for a bike ride today?" --tools examples/weather.py
    tao chat --tools examples/weather.py

Every ``@tool`` function at the top level of a file is a tool (``--tools examples/weather.py:get_weather``
picks one). The tools themselves live in the package (``tao.tools.demo_weather``, also
``--tools tao.tools.demo_weather``), so that ``tao serve`` offers them from an installed wheel
too; this file is what a project of your own would write: import or define ``@tool``s.
"""

from __future__ import annotations

from tao.tools.demo_weather import get_weather, search_web, calculate  # noqa: F401 - the tools

__all__ = ["get_weather", "search_web", "calculate"]
