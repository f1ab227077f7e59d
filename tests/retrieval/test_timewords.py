"""Time expressions become windows relative to the question's time: dates, months, seasons, weekdays, spans,
shifts; month lengths, leap years and year boundaries; nonsense never raises."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m3.retrieval.timewords import Window, closeness, windows
from tests.fuzzing import EXAMPLES

#: A Sunday.
NOW = datetime(2023, 8, 20, 15, 30, tzinfo=UTC)


def spans(text: str, now: datetime = NOW) -> list[tuple[date, date]]:
    """The windows of ``text`` as (first day, day after the last)."""
    return [(w.start.date(), w.end.date()) for w in windows(text, now)]


def day(y: int, m: int, d: int) -> tuple[date, date]:
    return date(y, m, d), date(y, m, d) + timedelta(days=1)


@pytest.mark.parametrize(("text", "expected"), [
    ("What did Maria do on May 3, 2023?", day(2023, 5, 3)),
    ("on 7 July, 2023", day(2023, 7, 7)),
    ("the 1st of May 2022", day(2022, 5, 1)),
    ("October 13th", day(2022, 10, 13)),  # without a year: the latest 13 October not after now
    ("August 20", day(2023, 8, 20)),
    ("2023-05-03", day(2023, 5, 3)),
    ("10/31/2022", day(2022, 10, 31)),
])
def test_absolute_dates_name_their_day(text: str, expected: tuple[date, date]) -> None:
    assert spans(text) == [expected]


@pytest.mark.parametrize(("text", "expected"), [
    ("in May 2023", (date(2023, 5, 1), date(2023, 6, 1))),
    ("December 2023", (date(2023, 12, 1), date(2024, 1, 1))),  # a year boundary
    ("in February 2024", (date(2024, 2, 1), date(2024, 3, 1))),  # 29 days in a leap year
    ("in February 2023", (date(2023, 2, 1), date(2023, 3, 1))),
    ("camping in June", (date(2023, 6, 1), date(2023, 7, 1))),
    ("in September", (date(2022, 9, 1), date(2022, 10, 1))),  # not begun yet this year: last year's
    ("early March 2022", (date(2022, 3, 1), date(2022, 3, 11))),
    ("late April 2021", (date(2021, 4, 21), date(2021, 5, 1))),
    ("the beginning of November 2022", (date(2022, 11, 1), date(2022, 11, 11))),
    ("in 2022", (date(2022, 1, 1), date(2023, 1, 1))),
])
def test_months_and_years_name_their_span(text: str, expected: tuple[date, date]) -> None:
    assert spans(text) == [expected]


def test_may_is_a_month_only_when_written_as_one() -> None:
    assert spans("You may go, it may rain") == []
    assert spans("what did we plan in May") == [(date(2023, 5, 1), date(2023, 6, 1))]


@pytest.mark.parametrize(("text", "expected"), [
    ("last summer", (date(2022, 6, 1), date(2022, 9, 1))),  # this summer has not ended on 20 August
    ("this summer", (date(2023, 6, 1), date(2023, 9, 1))),
    ("last spring", (date(2023, 3, 1), date(2023, 6, 1))),
    ("summer 2021", (date(2021, 6, 1), date(2021, 9, 1))),
    ("winter 2022", (date(2022, 12, 1), date(2023, 3, 1))),
    ("next autumn", (date(2023, 9, 1), date(2023, 12, 1))),
])
def test_seasons_are_the_northern_meteorological_ones(text: str, expected: tuple[date, date]) -> None:
    assert spans(text) == [expected]


@pytest.mark.parametrize(("text", "expected"), [
    ("yesterday", day(2023, 8, 19)),
    ("the day before yesterday", day(2023, 8, 18)),
    ("today", day(2023, 8, 20)),
    ("last Saturday", day(2023, 8, 19)),
    ("on Sunday", day(2023, 8, 13)),  # a bare weekday is the latest one before today
    ("next Friday", day(2023, 8, 25)),
    ("10 days ago", day(2023, 8, 10)),
    ("two weeks ago", (date(2023, 8, 3), date(2023, 8, 10))),
    ("a month ago", (date(2023, 7, 5), date(2023, 8, 5))),
    ("last week", (date(2023, 8, 7), date(2023, 8, 14))),
    ("this week", (date(2023, 8, 14), date(2023, 8, 21))),
    ("last month", (date(2023, 7, 1), date(2023, 8, 1))),
    ("last year", (date(2022, 1, 1), date(2023, 1, 1))),
    ("earlier this year", (date(2023, 1, 1), date(2023, 8, 21))),
    ("the past 3 months", (date(2023, 5, 20), date(2023, 8, 21))),
    ("last weekend", (date(2023, 8, 12), date(2023, 8, 14))),
    ("recently", (date(2023, 7, 21), date(2023, 8, 21))),
])
def test_relative_times_count_from_now(text: str, expected: tuple[date, date]) -> None:
    assert spans(text) == [expected]


@pytest.mark.parametrize(("text", "expected"), [
    ("the week before August 3, 2023", (date(2023, 7, 27), date(2023, 8, 4))),
    ("two weeks before August 11, 2023", (date(2023, 7, 28), date(2023, 8, 12))),
    ("last weekend before April 10, 2023", (date(2023, 4, 8), date(2023, 4, 11))),
    ("3 days after May 1", (date(2023, 5, 1), date(2023, 5, 5))),
    ("since March", (date(2023, 3, 1), date(2023, 8, 21))),
])
def test_a_shift_moves_the_anchor_and_keeps_its_day(text: str, expected: tuple[date, date]) -> None:
    assert spans(text) == [expected]


def test_a_month_ago_from_the_31st_lands_on_the_last_day_of_a_shorter_month() -> None:
    assert spans("a month ago", datetime(2023, 3, 31, tzinfo=UTC)) == [(date(2023, 2, 13), date(2023, 3, 16))]
    assert spans("a year ago", datetime(2024, 2, 29, tzinfo=UTC)) == [(date(2022, 8, 30), date(2023, 8, 30))]


def test_twenty_ninth_of_february_without_a_year_is_the_latest_leap_day() -> None:
    assert spans("on 29 February", NOW) == [day(2020, 2, 29)]
    assert spans("on 29 February", datetime(2024, 3, 1, tzinfo=UTC)) == [day(2024, 2, 29)]


def test_relative_times_cross_year_boundaries() -> None:
    new_year = datetime(2024, 1, 2, 9, tzinfo=UTC)
    assert spans("last month", new_year) == [(date(2023, 12, 1), date(2024, 1, 1))]
    assert spans("last week", new_year) == [(date(2023, 12, 25), date(2024, 1, 1))]
    assert spans("in December", new_year) == [(date(2023, 12, 1), date(2024, 1, 1))]
    assert spans("3 days ago", new_year) == [day(2023, 12, 30)]


def test_several_expressions_give_several_windows_in_text_order() -> None:
    assert spans("between March 2022 and yesterday") == [(date(2022, 3, 1), date(2022, 4, 1)), day(2023, 8, 19)]


@pytest.mark.parametrize("text", ["", "the week before my birthday", "2023-13-45",
                                  "99999 days ago", "in 12345", "I have 2000 apples", "10:30", "5 of 7",
                                  "Kim Fall fell"])
def test_text_without_a_usable_time_names_no_window(text: str) -> None:
    assert windows(text, NOW) == []


def test_an_impossible_day_falls_back_to_its_month() -> None:
    assert spans("on 30 February 2023") == [(date(2023, 2, 1), date(2023, 3, 1))]


def test_a_naive_now_is_taken_as_utc() -> None:
    assert spans("yesterday", NOW.replace(tzinfo=None)) == [day(2023, 8, 19)]


@settings(max_examples=EXAMPLES, deadline=None)
@given(text=st.text(max_size=200), now=st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
def test_windows_never_raise_and_are_never_empty_spans(text: str, now: datetime) -> None:
    for w in windows(text, now):
        assert w.start < w.end


@settings(max_examples=EXAMPLES, deadline=None)
@given(words=st.lists(st.sampled_from(["last", "next", "this", "ago", "May", "may", "29", "February", "2024",
                                       "week", "weekend", "before", "after", "since", "two", "days", "Saturday",
                                       "summer", "winter", "the", "of", "9999", "0001", "1", "31", "December"]),
                      max_size=8),
       now=st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
def test_time_words_in_any_order_never_raise(words: list[str], now: datetime) -> None:
    for w in windows(" ".join(words), now):
        assert w.start < w.end


def test_closeness_is_one_inside_and_decays_with_distance_outside() -> None:
    june = [Window(datetime(2023, 6, 1, tzinfo=UTC), datetime(2023, 7, 1, tzinfo=UTC), "in June")]
    inside, near, far = (closeness(datetime(2023, m, d, tzinfo=UTC), june) for m, d in ((6, 15), (7, 3), (9, 1)))
    assert inside == 1.0
    assert 0 < far < near < 1
    assert closeness(datetime(2023, 6, 15, tzinfo=UTC), []) == 0.0
