"""Seed 001's demo tools, with made-up data: ``get_weather``, ``search_web`` and ``calculate``.

Part of the package so that ``tao serve`` offers them wherever tao is installed (a wheel has no
``examples/``); ``examples/weather.py`` re-exports them for ``tao run --tools examples/weather.py``.
The weather is a fixed table, not a forecast: the point is the agent's chain - look both cities
up, look up what suits running, compare, answer - not the data. Cities are known by their Chinese
or English names; a tool answers in the language it was asked in.

``calculate`` here answers "expression = value" (the seed's own tool), unlike
``tao.tools.calculator.calculate``, which returns the number: two tools with one name, so a
picker that offers both sets keeps one of them (``tao.web``).
"""

from __future__ import annotations

from .base import tool
from .calculator import evaluate

# city -> (zh name, en name, zh report, en report)
_WEATHER = {
    "beijing": ("北京", "Beijing", "晴，19°C，北风 2 级，湿度 35%，空气质量良（AQI 62）",
                "sunny, 19°C, north wind force 2, humidity 35%, air quality good (AQI 62)"),
    "shanghai": ("上海", "Shanghai", "中雨，16°C，东风 5 级，湿度 92%，空气质量优（AQI 28）",
                 "moderate rain, 16°C, east wind force 5, humidity 92%, air quality excellent (AQI 28)"),
    "guangzhou": ("广州", "Guangzhou", "多云，29°C，南风 2 级，湿度 78%，空气质量良（AQI 55）",
                  "cloudy, 29°C, south wind force 2, humidity 78%, air quality good (AQI 55)"),
    "shenzhen": ("深圳", "Shenzhen", "雷阵雨，27°C，东南风 3 级，湿度 85%，空气质量优（AQI 31）",
                 "thunder showers, 27°C, south-east wind force 3, humidity 85%, air quality excellent (AQI 31)"),
    "chengdu": ("成都", "Chengdu", "阴，14°C，无持续风向，湿度 70%，空气质量轻度污染（AQI 118）",
                "overcast, 14°C, calm, humidity 70%, air quality lightly polluted (AQI 118)"),
    "hangzhou": ("杭州", "Hangzhou", "多云转晴，21°C，西北风 3 级，湿度 55%，空气质量良（AQI 47）",
                 "cloudy then sunny, 21°C, north-west wind force 3, humidity 55%, air quality good (AQI 47)"),
}
_BY_NAME = {name.lower(): key for key, (zh, en, *_) in _WEATHER.items() for name in (zh, en)}

# what search_web knows: (keywords, zh text, en text)
_PAGES = [
    (("跑步", "温度", "气温", "running", "run", "temperature"),
     "跑步的适宜气温约为 10–20°C；超过 28°C 易中暑，低于 0°C 注意保暖。",
     "The best air temperature for running is about 10-20°C; above 28°C risks heat stress, "
     "below 0°C dress warmly."),
    (("雨", "rain", "湿", "wet"),
     "小雨可以慢跑，但中雨及以上路面湿滑、视线差，建议改在室内；雷雨天气不要外出运动。",
     "Light rain is fine for an easy run; from moderate rain on, roads are slippery and "
     "visibility is poor, so train indoors; never exercise outside in a thunderstorm."),
    (("空气", "aqi", "air", "污染", "pollution"),
     "AQI 0–50 优、51–100 良，适合户外运动；101–150 轻度污染，敏感人群应减少户外运动。",
     "AQI 0-50 is excellent and 51-100 good, both fine for outdoor exercise; 101-150 is "
     "lightly polluted: sensitive people should cut outdoor exercise."),
    (("风", "wind"),
     "风力 3 级以下对跑步影响很小；5 级以上逆风跑步明显费力。",
     "Wind below force 3 hardly affects a run; from force 5 on, running into it is hard work."),
]


def _zh(text: str) -> bool:
    return any("\u4e00" <= c <= "\u9fff" for c in text)


@tool
def get_weather(city: str) -> str:
    """查询城市今天的天气 / Today's weather in a city.

    Args:
        city: 城市名，如 北京、上海 / the city, e.g. Beijing or 上海
    """
    name = city.strip().removesuffix("市").removesuffix(", China").strip()
    key = _BY_NAME.get(name.lower())
    if key is None:
        known = "、".join(v[0] for v in _WEATHER.values()) if _zh(city) else \
            ", ".join(v[1] for v in _WEATHER.values())
        return (f"没有 {city} 的天气数据（有：{known}）" if _zh(city)
                else f"no weather data for {city} (known: {known})")
    zh, en, zh_report, en_report = _WEATHER[key]
    return f"{zh}：{zh_report}" if _zh(city) else f"{en}: {en_report}"


@tool
def search_web(query: str) -> str:
    """搜索网页，返回相关资料 / Search the web for background facts.

    Args:
        query: 搜索关键词 / what to search for
    """
    q = query.lower()
    hits = [(zh if _zh(query) else en) for words, zh, en in _PAGES if any(w in q for w in words)]
    if not hits:
        return f"没有找到与“{query}”相关的结果" if _zh(query) else f"no results for {query!r}"
    return "\n".join(hits)


@tool
def calculate(expression: str) -> str:
    """计算算术表达式 / Evaluate an arithmetic expression, e.g. (19 + 16) / 2.

    Args:
        expression: 只含数字、+ - * / 和括号 / numbers, + - * / and parentheses
    """
    value = evaluate(expression)  # tao's AST whitelist: never eval()
    return f"{expression} = {value:g}" if isinstance(value, float) else f"{expression} = {value}"
