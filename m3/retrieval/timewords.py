"""Time expressions in text, turned into windows of time relative to a reference ``now``. Pure, deterministic.

:func:`windows` finds what a question or a memory says about *when*: absolute dates (``3 May 2023``,
``May 3rd``, ``2023-05-03``, ``5/3/2023``), months (``in June``, ``December 2023``, ``early March``), years
(``in 2022``), seasons (``last summer``, ``spring 2021``), weekdays (``last Saturday``), relative spans
(``10 days ago``, ``two weeks ago``, ``the past 3 months``), calendar units (``last/this/next
week|month|year``, ``last weekend``), days (``yesterday``, ``today``, ``last night``), vague recency
(``recently``, ``lately``) and shifts of an anchor (``the week before August 3, 2023``, ``two days after
May 1``, ``since March``). Each becomes a :class:`Window` ``[start, end)`` in UTC.

Conventions (the reader's past is what memory questions are about): a date or month without a year is its
latest occurrence not after ``now``; bare weekdays mean the latest one before today; weeks start on Monday;
seasons are the northern meteorological ones (winter Y = December Y to February Y+1); ``N units ago`` is
the day N units back, widened by half a unit each side for weeks and longer. Windows are in UTC days.

Anything unparseable is skipped: no input makes :func:`windows` raise (impossible dates such as 30
February, years outside 1..9999, huge counts are ignored). Matching is by regular expressions only, each
bounded, so scanning is linear in the text's length.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_MONTH_INDEX = {name: i + 1 for i, name in enumerate(MONTHS)}
_MONTH_INDEX.update({name[:3]: i + 1 for i, name in enumerate(MONTHS)})
_MONTH_INDEX["sept"] = 9
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "a couple of": 2,
            "couple of": 2, "a few": 3, "few": 3, "several": 3}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30.44, "year": 365.25, "decade": 3652.5}
#: Vague recency ("recently", "lately") covers this many days before ``now``.
RECENT_DAYS = 30
#: Counts above this are not times ("10000 years ago" is not about a memory).
_MAX_COUNT = 200

_FULL_MONTH = "|".join(MONTHS)
_ANY_MONTH = _FULL_MONTH + "|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec"
_NUM = (r"\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
        r"|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several")
_UNIT = r"(day|week|month|year|decade)s?"
_YEAR = r"(?<![\d$\u20ac\u00a3.,])(1[6-9]\d\d|2[01]\d\d)(?![\d%])"
_PART = r"(?:(early|late|mid|the\s+(?:beginning|start|end|middle)\s+of|(?:beginning|start|end|middle)\s+of)\s*-?\s*)?"


@dataclass(frozen=True)
class Window:
    """A span of time ``[start, end)`` named by ``text`` (the words that named it)."""

    start: datetime
    end: datetime
    text: str

    def days(self) -> float:
        return (self.end - self.start).total_seconds() / 86400.0


def windows(text: str, now: datetime) -> list[Window]:
    """Every time window ``text`` names, relative to ``now`` (aware; naive is taken as UTC), in text order.

    Never raises: an expression that cannot be turned into a window is skipped.
    """
    if not text:
        return []
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    claimed: list[tuple[int, int]] = []
    found: list[tuple[int, Window]] = []
    for pattern, handler in _RULES:
        for match in pattern.finditer(text):
            span = match.span()
            if any(span[0] < e and s < span[1] for s, e in claimed):
                continue
            try:
                got = handler(match, now.date())
            except (ValueError, OverflowError, KeyError):
                got = None
            if got is None:
                continue
            try:
                begin, (start, end) = _shift(text, span[0], got, now.date())
                window = Window(_at(start), _at(end), text[begin:span[1]].strip())
            except (ValueError, OverflowError, KeyError):
                continue
            if start >= end:
                continue
            claimed.append((begin, span[1]))
            found.append((begin, window))
    return [w for _, w in sorted(found, key=lambda pair: pair[0])]


Span = tuple[date, date]
Handler = Callable[[re.Match[str], date], Span | None]


def _at(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _count(word: str) -> int:
    word = " ".join(word.lower().split())
    value = int(word) if word.isdigit() else _NUMBERS[word]
    if not 0 < value <= _MAX_COUNT:
        raise ValueError(word)
    return value


def _add_months(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + delta
    return index // 12, index % 12 + 1


def _month_span(year: int, month: int) -> Span:
    ny, nm = _add_months(year, month, 1)
    return date(year, month, 1), date(ny, nm, 1)


def _month_part(part: str | None, year: int, month: int) -> Span:
    """The month, or its first/middle/last third for early/mid/late (beginning/middle/end of)."""
    start, end = _month_span(year, month)
    word = (part or "").lower()
    if "early" in word or "beginning" in word or "start" in word:
        return start, start + timedelta(days=10)
    if "mid" in word:
        return start + timedelta(days=10), start + timedelta(days=20)
    if "late" in word or "end" in word:
        return start + timedelta(days=20), end
    return start, end


def _latest_month(month: int, today: date) -> int:
    """The year of the latest occurrence of ``month`` that has begun by ``today``."""
    return today.year if month <= today.month else today.year - 1


def _latest_day(month: int, day: int, today: date) -> date:
    this_year = date(today.year, month, day) if _valid(today.year, month, day) else None
    if this_year is not None and this_year <= today:
        return this_year
    for year in range(today.year - 1, max(0, today.year - 9), -1):  # 29 February: the latest leap year
        if _valid(year, month, day):
            return date(year, month, day)
    raise ValueError(f"no {day}/{month}")


def _valid(year: int, month: int, day: int) -> bool:
    try:
        date(year, month, day)
    except ValueError:
        return False
    return True


def _day(d: date) -> Span:
    return d, d + timedelta(days=1)


def _month_of(word: str) -> int:
    return _MONTH_INDEX[word.lower().rstrip(".")]


# -- handlers -------------------------------------------------------------------------------------------


def _iso(m: re.Match[str], today: date) -> Span | None:
    return _day(date(int(m.group(1)), int(m.group(2)), int(m.group(3))))


def _us_numeric(m: re.Match[str], today: date) -> Span | None:
    return _day(date(int(m.group(3)), int(m.group(1)), int(m.group(2))))


def _day_month(m: re.Match[str], today: date) -> Span | None:
    day, month, year = int(m.group(1)), _month_of(m.group(2)), m.group(3)
    return _day(date(int(year), month, day) if year else _latest_day(month, day, today))


def _month_day(m: re.Match[str], today: date) -> Span | None:
    month, day, year = _month_of(m.group(1)), int(m.group(2)), m.group(3)
    return _day(date(int(year), month, day) if year else _latest_day(month, day, today))


def _month_year(m: re.Match[str], today: date) -> Span | None:
    return _month_part(m.group(1), int(m.group(3)), _month_of(m.group(2)))


def _month_alone(m: re.Match[str], today: date) -> Span | None:
    lead, part, name = (m.group(1) or "").lower(), m.group(2), m.group(3)
    if name.lower() == "may" and (name != "May" or not (lead or part)):
        return None  # "may" is usually the verb: only "in May", "last May", "early May" … name the month
    month = _month_of(name)
    year = _latest_month(month, today)
    if lead.startswith("last") and year == today.year and month == today.month:
        year -= 1
    elif lead.startswith("next"):
        year = today.year if month > today.month else today.year + 1
    elif lead.startswith("this"):
        year = today.year
    return _month_part(part, year, month)


_SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}


def _season(m: re.Match[str], today: date) -> Span | None:
    lead, name, year_text = (m.group(1) or "").lower(), m.group(2).lower(), m.group(3)
    first = _SEASON_START[name]

    def span(year: int) -> Span:
        return date(year, first, 1), date(*_add_months(year, first, 3), 1)

    if year_text:
        return span(int(year_text))
    if name == "fall" and not lead:
        return None  # "the fall" is usually a fall
    begun = today.year if date(today.year, first, 1) <= today else today.year - 1
    if lead.startswith("last"):
        return span(begun if span(begun)[1] <= today else begun - 1)
    if lead.startswith("next"):
        return span(begun + 1)
    if lead.startswith("this"):
        return span(today.year if name != "winter" or today.month == 12 else today.year - 1)
    return span(begun)


def _year(m: re.Match[str], today: date) -> Span | None:
    year = int(m.group(2))
    return date(year, 1, 1), date(year + 1, 1, 1)


def _ago(m: re.Match[str], today: date) -> Span | None:
    n, unit = _count(m.group(1)), m.group(2).lower()
    centre = _back(today, n, unit)
    half = {"day": 0, "week": 3, "month": 15, "year": 182, "decade": 1826}[unit]
    return centre - timedelta(days=half), centre + timedelta(days=half + 1)


def _back(today: date, n: int, unit: str) -> date:
    if unit == "day":
        return today - timedelta(days=n)
    if unit == "week":
        return today - timedelta(weeks=n)
    months = n * {"month": 1, "year": 12, "decade": 120}[unit]
    year, month = _add_months(today.year, today.month, -months)
    for day in range(today.day, min(today.day, 28) - 1, -1):  # 31 March - 1 month: the last day of February
        if _valid(year, month, day):
            return date(year, month, day)
    return date(year, month, 28)  # raises for a year outside 1..9999


def _past_n(m: re.Match[str], today: date) -> Span | None:
    if not m.group(1) and not re.search(r"\bthe\s", m.group(0), re.IGNORECASE):
        return None  # "last week" is the calendar week (below); "the past week" the last seven days
    n = _count(m.group(1)) if m.group(1) else 1
    return _back(today, n, m.group(2).lower()), today + timedelta(days=1)


def _calendar(m: re.Match[str], today: date) -> Span | None:
    which, unit = m.group(1).lower().split()[-1], m.group(2).lower()
    step = {"last": -1, "previous": -1, "this": 0, "next": 1}[which]
    earlier = m.group(1).lower().startswith("earlier")
    if unit == "week":
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        span = (monday, monday + timedelta(days=7))
    elif unit == "month":
        span = _month_span(*_add_months(today.year, today.month, step))
    else:
        span = (date(today.year + step, 1, 1), date(today.year + step + 1, 1, 1))
    return (span[0], today + timedelta(days=1)) if earlier else span


def _weekend(m: re.Match[str], today: date) -> Span | None:
    lead = m.group(1).lower().split()[-1]
    saturday = today - timedelta(days=(today.weekday() - 5) % 7)  # the latest Saturday on or before today
    if lead == "next" or (lead == "this" and today.weekday() < 5):
        saturday += timedelta(days=7)
    elif lead in ("last", "past") and today.weekday() >= 5:
        saturday -= timedelta(days=7)
    return saturday, saturday + timedelta(days=2)


def _weekday(m: re.Match[str], today: date) -> Span | None:
    lead, target = (m.group(1) or "").lower().split(), WEEKDAYS.index(m.group(2).lower().rstrip("s"))
    back = (today.weekday() - target) % 7 or 7  # the latest one before today
    if lead and lead[-1] == "next":
        return _day(today + timedelta(days=(target - today.weekday()) % 7 or 7))
    if lead and lead[-1] == "this":
        return _day(today - timedelta(days=today.weekday()) + timedelta(days=target))
    return _day(today - timedelta(days=back))


def _named_day(m: re.Match[str], today: date) -> Span | None:
    word = " ".join(m.group(0).lower().split())
    if "before yesterday" in word:
        return _day(today - timedelta(days=2))
    if word in ("yesterday", "last night"):
        return _day(today - timedelta(days=1))
    if word == "tomorrow":
        return _day(today + timedelta(days=1))
    return _day(today)


def _recently(m: re.Match[str], today: date) -> Span | None:
    return today - timedelta(days=RECENT_DAYS), today + timedelta(days=1)


_SHIFT = re.compile(rf"(?:(?:({_NUM})\s+{_UNIT}|(?:the|that|last)\s+(day|week|weekend|month|year))\s+"
                    r"(before|after|prior\s+to)|(since|after))\s+(?:on\s+|in\s+)?$", re.IGNORECASE)
_LEAD = re.compile(r"(?:in|during|of|since|by|before|after|until|from|on)\s+", re.IGNORECASE)


def _shift(text: str, at: int, span: Span, today: date) -> tuple[int, Span]:
    """Apply a shift written just before the expression at ``at``: "the week before X", "2 days after X",
    "since X". Returns where the whole expression starts and its span. A shifted window keeps the anchor
    day itself: what happened the week before a date is often told on that date."""
    lead = _LEAD.match(text, at)
    cut = lead.end() if lead else at
    m = _SHIFT.search(text, max(0, at - 40), cut)
    if m is None:
        return at, span
    start, end = span
    if m.group(5):  # since X / after X: from X up to now
        return m.start(), (start, max(today + timedelta(days=1), end))
    unit = (m.group(3) or m.group(2) or "").lower()
    n = _count(m.group(1)) if m.group(1) else 1
    days = 2 if unit == "weekend" else round(n * _UNIT_DAYS[unit])
    if m.group(4).lower() == "after":
        return m.start(), (start, end + timedelta(days=days))
    return m.start(), (start - timedelta(days=days), end)


_RULES: tuple[tuple[re.Pattern[str], Handler], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), handler) for pattern, handler in (
        (r"\b(\d{4})[-/](\d{1,2})[-/](\d{1,2})\b", _iso),
        (r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b", _us_numeric),
        (rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_ANY_MONTH})\.?(?:,?\s*{_YEAR})?\b", _day_month),
        (rf"\b({_ANY_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?(?!\d)(?:,?\s*{_YEAR})?\b", _month_day),
        (rf"\b{_PART}({_FULL_MONTH}|{_ANY_MONTH}\.)(?:\s+of)?,?\s+{_YEAR}\b", _month_year),
        (r"\b(?:(last|this|next|the|in|during)\s+)?"
         rf"(spring|summer|autumn|fall|winter)(?:\s+(?:of\s+)?{_YEAR})?\b", _season),
        (rf"\b({_NUM})\s+{_UNIT}\s+ago\b", _ago),
        (rf"\b(?:(?:in|over|during|for)\s+)?(?:the\s+)?(?:last|past|previous)\s+(?:({_NUM})\s+)?{_UNIT}\b", _past_n),
        (r"\b(last|previous|this|next|earlier\s+this)\s+(week|month|year)\b", _calendar),
        (r"\b(last|past|this|next|over\s+the|the)\s+weekend\b", _weekend),
        (r"\b(?:(last|this|next|on|past)\s+)?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
         _weekday),
        (r"\b(?:the\s+day\s+before\s+yesterday|yesterday|last\s+night|today|tonight|tomorrow"
         r"|this\s+(?:morning|afternoon|evening))\b", _named_day),
        (r"\b(?:recently|lately|these\s+days|the\s+other\s+day)\b", _recently),
        (rf"\b(?:(in|during|of|since|by|before|after|until|last|this|next)\s+)?{_PART}({_FULL_MONTH})\b",
         _month_alone),
        (rf"\b(in|during|of|since|by|before|after|until|from|year)\s+{_YEAR}", _year),
    )
)


# -- closeness of a time to the windows a question names ------------------------------------------------

#: Outside a window the closeness halves every ``max(MIN_HALF_DAYS, SPREAD * window length)`` days, so a
#: day tolerates a few days' slack and a year some months (tuned on the dev sets, docs/search.md).
MIN_HALF_DAYS = 2.0
SPREAD = 0.5


def closeness(at: datetime, named: list[Window]) -> float:
    """1 when ``at`` lies in one of the ``named`` windows, decaying with the distance to the nearest; 0 for none."""
    best = 0.0
    for w in named:
        if w.start <= at < w.end:
            return 1.0
        gap = (w.start - at if at < w.start else at - w.end).total_seconds() / 86400.0
        best = max(best, 0.5 ** (gap / max(MIN_HALF_DAYS, SPREAD * w.days())))
    return best
