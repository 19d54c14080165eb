//! `new Date(value).getTime()` for the values a transcript's `timestamp` holds.
//!
//! Strings follow the ECMAScript date-time format (`YYYY`, `YYYY-MM`,
//! `YYYY-MM-DD`, optionally `THH:mm`, `:ss`, `.sss…`, then `Z` or `±HH:mm`).
//! A date-time without an offset is local time in JavaScript; here it is read
//! as UTC (the time zone of the differential tests). Strings outside that
//! format, which V8 may still guess at, give NaN.

use serde_json::Value;

/// Largest time value JavaScript dates allow (±8.64e15 ms).
const MAX_TIME: f64 = 8.64e15;

/// `new Date(value).getTime()`; `NaN` where JavaScript gives an invalid date.
pub fn js_date_ms(value: &Value) -> f64 {
    match value {
        Value::String(s) => parse_iso(s).unwrap_or(f64::NAN),
        Value::Number(n) => {
            let n = n.as_f64().unwrap_or(f64::NAN);
            if n.abs() <= MAX_TIME {
                n.trunc() + 0.0
            } else {
                f64::NAN
            }
        }
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Array(_) | Value::Object(_) => f64::NAN,
    }
}

struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, n: usize) -> Option<i64> {
        let part = self.s.get(self.at..self.at + n)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.at += n;
        part.iter().try_fold(0i64, |acc, d| Some(acc * 10 + i64::from(d - b'0')))
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn done(&self) -> bool {
        self.at == self.s.len()
    }
}

fn parse_iso(text: &str) -> Option<f64> {
    let mut c = Cursor { s: text.as_bytes(), at: 0 };
    let year = if c.eat(b'+') {
        c.digits(6)?
    } else if c.eat(b'-') {
        let y = c.digits(6)?;
        if y == 0 {
            return None; // -000000 is not allowed
        }
        -y
    } else {
        c.digits(4)?
    };
    let month = if c.eat(b'-') { c.digits(2)? } else { 1 };
    let day = if month_given(&c) && c.eat(b'-') { c.digits(2)? } else { 1 };
    let (mut hour, mut minute, mut second, mut millis) = (0, 0, 0, 0.0);
    let mut offset_min = 0i64;
    // V8 also takes a space for the `T` (its fallback parser).
    if c.eat(b'T') || (c.at == 10 && c.eat(b' ')) {
        hour = c.digits(2)?;
        if !c.eat(b':') {
            return None;
        }
        minute = c.digits(2)?;
        if c.eat(b':') {
            second = c.digits(2)?;
            if c.eat(b'.') {
                let start = c.at;
                while c.s.get(c.at).is_some_and(u8::is_ascii_digit) {
                    c.at += 1;
                }
                let frac = &text[start..c.at];
                if frac.is_empty() {
                    return None;
                }
                // Milliseconds: the first three digits, truncated.
                let ms: String = frac.chars().chain("00".chars()).take(3).collect();
                millis = ms.parse::<f64>().ok()?;
            }
        }
        if c.eat(b'Z') {
        } else if c.s.get(c.at).is_some_and(|&b| b == b'+' || b == b'-') {
            let sign = if c.eat(b'+') {
                1
            } else {
                c.at += 1;
                -1
            };
            let h = c.digits(2)?;
            if !c.eat(b':') {
                return None;
            }
            let m = c.digits(2)?;
            if h > 23 || m > 59 {
                return None;
            }
            offset_min = sign * (h * 60 + m);
        }
    }
    if !c.done() || !(1..=12).contains(&month) || minute > 59 || second > 59 {
        return None;
    }
    if hour > 24 || (hour == 24 && (minute != 0 || second != 0 || millis != 0.0)) {
        return None;
    }
    if !(1..=31).contains(&day) {
        return None;
    }
    // V8 rolls a day past the month's end into the next month (Feb 30 = Mar 2).
    let first = jiff::civil::Date::new(i16::try_from(year).ok()?, month as i8, 1).ok()?;
    let days = first.since(jiff::civil::date(1970, 1, 1)).ok()?.get_days() + (day as i32 - 1);
    let ms = (f64::from(days) * 86_400.0 + (hour * 3600 + minute * 60 + second - offset_min * 60) as f64)
        * 1000.0
        + millis;
    (ms.abs() <= MAX_TIME).then_some(ms)
}

fn month_given(c: &Cursor<'_>) -> bool {
    // A day can only follow a month: "YYYY-MM-DD".
    c.at >= 7
}

/// A time given as text: Unix milliseconds (digits), else an ISO-8601 time
/// as `Date.parse` reads it; `None` when it is neither.
pub fn parse_time_ms(text: &str) -> Option<i64> {
    if let Ok(ms) = text.parse::<i64>() {
        return Some(ms);
    }
    let ms = js_date_ms(&serde_json::Value::from(text));
    (!ms.is_nan()).then_some(ms as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> f64 {
        js_date_ms(&Value::from(s))
    }

    #[test]
    fn iso_forms_match_javascript() {
        // Values from node: new Date(s).getTime()
        assert_eq!(ms("2025-12-09T00:53:29.825Z"), 1_765_241_609_825.0);
        assert_eq!(ms("2026-01-05T10:00:00.000Z"), 1_767_607_200_000.0);
        assert_eq!(ms("2026-01-05"), 1_767_571_200_000.0);
        assert_eq!(ms("2026-01"), 1_767_225_600_000.0);
        assert_eq!(ms("2026-01-05T10:00:00.1234Z"), 1_767_607_200_123.0);
        assert_eq!(ms("2026-01-05T12:00:00+02:00"), 1_767_607_200_000.0);
        assert!(ms("not a date").is_nan());
        assert_eq!(ms("2026-02-30T00:00:00Z"), 1_772_409_600_000.0);
        assert!(ms("2026-02-32T00:00:00Z").is_nan());
        assert_eq!(ms("2026-01-05T24:00:00Z"), 1_767_657_600_000.0);
        assert_eq!(ms("2026-01-05 10:00:00"), 1_767_607_200_000.0);
        assert_eq!(js_date_ms(&Value::Null), 0.0);
        assert_eq!(js_date_ms(&serde_json::json!(1.9)), 1.0);
    }
}
