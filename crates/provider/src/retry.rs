//! When to try a failed request again, and how long to wait.
//!
//! The defaults are those of the provider SDKs that OpenClaw and Pi send
//! their model requests through (`maxRetries: 2`, so three attempts in all;
//! `0.5 s × 2^n` capped at 8 s, shortened by up to a quarter at random), with
//! the server's own answer first: `retry-after-ms` (milliseconds, decimals
//! allowed), `retry-after` (whole seconds or an HTTP date), the larger of the
//! two when both are sent — OpenClaw's reading of the pair (an HTTP date is
//! measured from the response's own `date` header when it has one, so a
//! skewed local clock does not stretch the wait and a replay waits as the
//! recording did). A wait longer
//! than [`RetryPolicy::max_retry_after`] is not slept through: the error goes
//! back to the caller with its `retry_after_ms`, so an interactive session
//! never hangs for an hour on a quota reset.
//!
//! The jitter draws from a generator seeded with [`RetryPolicy::seed`], so a
//! test (and a replay) sees the same delays every time.

use std::time::{Duration, SystemTime};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How a client retries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// The wait before the second attempt.
    pub initial_delay: Duration,
    /// The longest computed wait.
    pub max_delay: Duration,
    /// The share of a computed wait taken off at random (0.25 = up to 25 %).
    pub jitter: f64,
    /// The longest server-requested wait the client sleeps through.
    pub max_retry_after: Duration,
    /// The seed of the jitter's generator.
    pub seed: u64,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 3,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            jitter: 0.25,
            max_retry_after: Duration::from_secs(60),
            seed: 0,
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn never() -> RetryPolicy {
        RetryPolicy { max_attempts: 1, ..RetryPolicy::default() }
    }

    /// The jitter source for one call.
    pub fn rng(&self) -> Jitter {
        Jitter(ChaCha8Rng::seed_from_u64(self.seed))
    }

    /// The wait after failed attempt `attempt` (1-based) when the server
    /// asked for none: `initial × 2^(attempt−1)`, capped, less the jitter.
    pub fn backoff(&self, attempt: u32, jitter: &mut Jitter) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let base = self.initial_delay.saturating_mul(1 << exp).min(self.max_delay);
        let cut = if self.jitter > 0.0 { jitter.0.gen::<f64>() * self.jitter.min(1.0) } else { 0.0 };
        base.mul_f64(1.0 - cut)
    }

    /// The wait before the next attempt: the server's, when it gave one of
    /// at most [`RetryPolicy::max_retry_after`]; otherwise the backoff.
    /// `None` means do not retry (the server asked for a longer wait).
    pub fn delay(
        &self,
        attempt: u32,
        retry_after: Option<Duration>,
        jitter: &mut Jitter,
    ) -> Option<Duration> {
        match retry_after {
            Some(wait) if wait > self.max_retry_after => None,
            Some(wait) if !wait.is_zero() => Some(wait),
            _ => Some(self.backoff(attempt, jitter)),
        }
    }
}

/// The seeded generator behind a policy's jitter.
#[derive(Debug, Clone)]
pub struct Jitter(ChaCha8Rng);

/// The wait a response asks for through `retry-after-ms` and `retry-after`
/// (the larger when both are present), `now` being the client's clock for
/// an HTTP date. Unreadable values are ignored; a date in the past is zero.
pub fn retry_after(headers: &[(String, String)], now: SystemTime) -> Option<Duration> {
    let mut wait: Option<Duration> = None;
    for (name, value) in headers {
        let value = value.trim();
        let this = if name.eq_ignore_ascii_case("retry-after-ms") {
            millis(value)
        } else if name.eq_ignore_ascii_case("retry-after") {
            if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
                Some(value.parse::<u64>().map_or(Duration::MAX, Duration::from_secs))
            } else {
                http_date(value).map(|at| at.duration_since(now).unwrap_or(Duration::ZERO))
            }
        } else {
            None
        };
        if let Some(this) = this {
            wait = Some(wait.map_or(this, |w| w.max(this)));
        }
    }
    wait
}

fn millis(value: &str) -> Option<Duration> {
    let (int, frac) = value.split_once('.').unwrap_or((value, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || (value.contains('.') && frac.is_empty()) {
        return None;
    }
    let ms: f64 = value.parse().ok()?;
    Some(Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(Duration::MAX))
}

const MONTHS: [&str; 12] =
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// An HTTP date in any of its three forms (RFC 9110 §5.6.7): IMF-fixdate
/// `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT`
/// (two-digit years read as the nearest century that is not more than 50
/// years ahead) and asctime `Sun Nov  6 08:49:37 1994`.
pub fn http_date(value: &str) -> Option<SystemTime> {
    let month = |m: &str| MONTHS.iter().position(|x| *x == m).map(|i| i as i8 + 1);
    let num = |s: &str| s.parse::<i16>().ok();
    let (year, mon, day, time) = if let Some((_, rest)) = value.split_once(", ") {
        let parts: Vec<&str> = rest.split(' ').collect();
        match parts.as_slice() {
            [day, mon, year, time, "GMT"] if day.len() == 2 && year.len() == 4 => {
                (num(year)?, month(mon)?, num(day)?, *time)
            }
            [date, time, "GMT"] => {
                let mut d = date.split('-');
                let (day, mon, yy) = (d.next()?, d.next()?, d.next()?);
                if d.next().is_some() || yy.len() != 2 || day.len() != 2 {
                    return None;
                }
                let now_year = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).year();
                let mut year = now_year / 100 * 100 + num(yy)?;
                if year > now_year + 50 {
                    year -= 100;
                }
                (year, month(mon)?, num(day)?, *time)
            }
            _ => return None,
        }
    } else {
        let parts: Vec<&str> = value.split_whitespace().collect();
        match parts.as_slice() {
            [_, mon, day, time, year] if year.len() == 4 => (num(year)?, month(mon)?, num(day)?, *time),
            _ => return None,
        }
    };
    let mut t = time.split(':');
    let (h, m, s) = (num(t.next()?)?, num(t.next()?)?, num(t.next()?)?);
    if t.next().is_some() {
        return None;
    }
    // A leap second (60) is rounded forward, so the wait is never short.
    let (s, extra) = if s == 60 { (59, 1) } else { (s, 0) };
    let dt = jiff::civil::DateTime::new(year, mon, day as i8, h as i8, m as i8, s as i8, 0).ok()?;
    let ts = dt.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    let secs = ts.as_second() + extra;
    u64::try_from(secs).ok().map(|secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(retry_after(&h(&[("Retry-After", "7")]), now), Some(Duration::from_secs(7)));
        assert_eq!(
            retry_after(&h(&[("retry-after-ms", "1500.5")]), now),
            Some(Duration::from_micros(1_500_500))
        );
        // Both: the larger wins.
        assert_eq!(
            retry_after(&h(&[("retry-after", "2"), ("retry-after-ms", "3500")]), now),
            Some(Duration::from_millis(3500))
        );
        // 784111777 + 23 s, in the three date forms.
        for date in
            ["Sun, 06 Nov 1994 08:50:00 GMT", "Sunday, 06-Nov-94 08:50:00 GMT", "Sun Nov  6 08:50:00 1994"]
        {
            assert_eq!(
                retry_after(&h(&[("retry-after", date)]), now),
                Some(Duration::from_secs(23)),
                "{date}"
            );
        }
        assert_eq!(
            retry_after(&h(&[("retry-after", "Sat, 05 Nov 1994 08:50:00 GMT")]), now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&h(&[("retry-after", "1.5")]), now), None);
        assert_eq!(retry_after(&h(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&h(&[("x-other", "5")]), now), None);
    }

    #[test]
    fn backoff_doubles_caps_and_jitters_reproducibly() {
        let policy = RetryPolicy { jitter: 0.0, ..RetryPolicy::default() };
        let mut j = policy.rng();
        let waits: Vec<u128> = (1..=6).map(|a| policy.backoff(a, &mut j).as_millis()).collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 8000]);
        let policy = RetryPolicy { seed: 7, ..RetryPolicy::default() };
        let draw = |p: &RetryPolicy| {
            let mut j = p.rng();
            (1..=4).map(|a| p.backoff(a, &mut j)).collect::<Vec<_>>()
        };
        let (a, b) = (draw(&policy), draw(&policy));
        assert_eq!(a, b);
        for (attempt, wait) in a.iter().enumerate() {
            let base = 500u64 << attempt;
            assert!(wait.as_millis() as u64 <= base && wait.as_millis() as u64 >= base * 3 / 4, "{wait:?}");
        }
        assert_ne!(draw(&policy), draw(&RetryPolicy { seed: 8, ..policy }));
    }

    #[test]
    fn a_long_server_wait_is_not_slept_through() {
        let policy = RetryPolicy::default();
        let mut j = policy.rng();
        assert_eq!(policy.delay(1, Some(Duration::from_secs(61)), &mut j), None);
        assert_eq!(policy.delay(1, Some(Duration::from_secs(60)), &mut j), Some(Duration::from_secs(60)));
    }
}
