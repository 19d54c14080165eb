//! The pre-compaction memory flush's prompts as OpenClaw builds them (spec
//! compaction §6, memory §5; OpenClaw 2026.9's `buildMemoryFlushPlan` and
//! `resolveCronStyleNow`): `YYYY-MM-DD` becomes the date in the user's time
//! zone, and the prompt ends with a current-time line in that zone and in
//! UTC.

use jiff::civil::Weekday;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// OpenClaw's default memory-flush prompt (`YYYY-MM-DD` becomes the date).
pub const MEMORY_FLUSH_PROMPT: &str = "Pre-compaction memory flush. Store durable memories only in memory/YYYY-MM-DD.md (create memory/ if needed). Treat workspace bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, and AGENTS.md as read-only during this flush; never overwrite, replace, or edit them. If memory/YYYY-MM-DD.md already exists, APPEND new content only and do not overwrite existing entries. Do NOT create timestamped variant files (e.g., YYYY-MM-DD-HHMM.md); always use the canonical YYYY-MM-DD.md filename. If nothing to store, reply with NO_REPLY.";

/// OpenClaw's default memory-flush system prompt, added to the run's
/// (`YYYY-MM-DD` becomes the date).
pub const MEMORY_FLUSH_SYSTEM_PROMPT: &str = "Pre-compaction memory flush turn. The session is near auto-compaction; capture durable memories to disk. Store durable memories only in memory/YYYY-MM-DD.md (create memory/ if needed). Treat workspace bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, and AGENTS.md as read-only during this flush; never overwrite, replace, or edit them. If memory/YYYY-MM-DD.md already exists, APPEND new content only and do not overwrite existing entries. You may reply, but usually NO_REPLY is correct.";

/// The user's clock: a time zone and a 12- or 24-hour display.
#[derive(Debug, Clone, PartialEq)]
pub struct UserTime {
    /// The IANA name shown in the time line.
    pub name: String,
    /// The zone.
    pub zone: TimeZone,
    /// 24-hour display (OpenClaw detects it from the host; 12 on an en-US one).
    pub hour24: bool,
}

impl UserTime {
    /// The zone named `name` (an IANA name), or the host's when `None`
    /// (UTC when the host's has no name), as OpenClaw's `resolveUserTimezone`.
    pub fn resolve(name: Option<&str>, hour24: bool) -> Result<UserTime, String> {
        let name = name.map(str::trim).filter(|n| !n.is_empty());
        if let Some(name) = name {
            let zone = TimeZone::get(name).map_err(|e| format!("unknown time zone `{name}`: {e}"))?;
            return Ok(UserTime { name: name.to_owned(), zone, hour24 });
        }
        let host = TimeZone::try_system().ok();
        match host.as_ref().and_then(|z| z.iana_name().map(str::to_owned)) {
            Some(name) => Ok(UserTime { name, zone: host.unwrap_or(TimeZone::UTC), hour24 }),
            None => Ok(UserTime { name: "UTC".to_owned(), zone: TimeZone::UTC, hour24 }),
        }
    }
}

/// The flush turn's user prompt and system-prompt addition at `now_ms`.
pub fn flush_prompts(now_ms: i64, user: &UserTime) -> (String, String) {
    let date = date_stamp(now_ms, user);
    let prompt = MEMORY_FLUSH_PROMPT.replace("YYYY-MM-DD", &date);
    let prompt = format!("{}\n{}", prompt.trim_end(), time_line(now_ms, user));
    (prompt, MEMORY_FLUSH_SYSTEM_PROMPT.replace("YYYY-MM-DD", &date))
}

fn zoned(now_ms: i64, user: &UserTime) -> jiff::Zoned {
    Timestamp::from_millisecond(now_ms).unwrap_or(Timestamp::UNIX_EPOCH).to_zoned(user.zone.clone())
}

/// `YYYY-MM-DD` in the user's zone.
pub fn date_stamp(now_ms: i64, user: &UserTime) -> String {
    let z = zoned(now_ms, user);
    format!("{:04}-{:02}-{:02}", z.year(), z.month(), z.day())
}

/// `Current time: Monday, November 30th, 2026 - 7:00 PM (America/New_York)`
/// and `Reference UTC: 2026-12-01 00:00 UTC` on the next line.
pub fn time_line(now_ms: i64, user: &UserTime) -> String {
    let z = zoned(now_ms, user);
    let weekday = match z.weekday() {
        Weekday::Monday => "Monday",
        Weekday::Tuesday => "Tuesday",
        Weekday::Wednesday => "Wednesday",
        Weekday::Thursday => "Thursday",
        Weekday::Friday => "Friday",
        Weekday::Saturday => "Saturday",
        Weekday::Sunday => "Sunday",
    };
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let month = MONTHS[(z.month() as usize).clamp(1, 12) - 1];
    let day = z.day();
    let suffix = match day {
        11..=13 => "th",
        _ => match day % 10 {
            1 => "st",
            2 => "nd",
            3 => "rd",
            _ => "th",
        },
    };
    let time = if user.hour24 {
        format!("{:02}:{:02}", z.hour(), z.minute())
    } else {
        let hour = match z.hour() % 12 {
            0 => 12,
            h => h,
        };
        format!("{hour}:{:02} {}", z.minute(), if z.hour() < 12 { "AM" } else { "PM" })
    };
    let utc = zoned(now_ms, &UserTime { name: String::new(), zone: TimeZone::UTC, hour24: true });
    format!(
        "Current time: {weekday}, {month} {day}{suffix}, {} - {time} ({})\nReference UTC: {:04}-{:02}-{:02} {:02}:{:02} UTC",
        z.year(),
        user.name,
        utc.year(),
        utc.month(),
        utc.day(),
        utc.hour(),
        utc.minute()
    )
}

/// Minutes east of UTC of `zone` at `now_ms` (daylight saving included): the
/// offset the turn decision's daily boundary needs, which OpenClaw takes from
/// the gateway host's local time (spec sessions §5.2).
pub fn utc_offset_minutes(zone: &TimeZone, now_ms: i64) -> i64 {
    let at = Timestamp::from_millisecond(now_ms).unwrap_or(Timestamp::UNIX_EPOCH);
    i64::from(zone.to_offset(at).seconds()) / 60
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, hour24: bool) -> UserTime {
        UserTime::resolve(Some(name), hour24).unwrap()
    }

    /// Expected lines printed by OpenClaw 2026.9.6's `resolveCronStyleNow`
    /// for the same instants and zones.
    #[test]
    fn the_time_line_is_openclaws() {
        let cases = [
            (
                "America/New_York",
                1_796_083_221_000,
                "Current time: Monday, November 30th, 2026 - 7:00 PM (America/New_York)\nReference UTC: 2026-12-01 00:00 UTC",
            ),
            (
                "Asia/Kolkata",
                1_796_083_221_000,
                "Current time: Tuesday, December 1st, 2026 - 5:30 AM (Asia/Kolkata)\nReference UTC: 2026-12-01 00:00 UTC",
            ),
            (
                "UTC",
                1_767_445_500_000,
                "Current time: Saturday, January 3rd, 2026 - 1:05 PM (UTC)\nReference UTC: 2026-01-03 13:05 UTC",
            ),
            (
                "Europe/Berlin",
                1_783_810_740_000,
                "Current time: Sunday, July 12th, 2026 - 12:59 AM (Europe/Berlin)\nReference UTC: 2026-07-11 22:59 UTC",
            ),
        ];
        for (zone, ms, line) in cases {
            assert_eq!(time_line(ms, &user(zone, false)), line);
        }
        assert!(time_line(1_783_810_740_000, &user("Europe/Berlin", true))
            .contains("2026 - 00:59 (Europe/Berlin)"));
    }

    #[test]
    fn the_date_is_the_users_and_the_prompt_ends_with_the_time() {
        // 2026-12-01T00:00:21Z is still November 30th in New York.
        let (prompt, system) = flush_prompts(1_796_083_221_000, &user("America/New_York", false));
        assert!(prompt
            .starts_with("Pre-compaction memory flush. Store durable memories only in memory/2026-11-30.md"));
        assert!(
            prompt.contains("(e.g., 2026-11-30-HHMM.md); always use the canonical 2026-11-30.md filename.")
        );
        assert!(prompt.ends_with("reply with NO_REPLY.\nCurrent time: Monday, November 30th, 2026 - 7:00 PM (America/New_York)\nReference UTC: 2026-12-01 00:00 UTC"));
        assert!(system.contains("memory/2026-11-30.md") && !system.contains("YYYY"));
        assert!(UserTime::resolve(Some("Mars/Olympus"), false).unwrap_err().contains("Mars/Olympus"));
    }

    /// Offsets by hand: New York is UTC-5 in winter and UTC-4 in summer,
    /// Kolkata UTC+5:30 all year, UTC 0.
    #[test]
    fn utc_offsets_follow_the_zone_and_its_daylight_saving() {
        let tz = |n: &str| TimeZone::get(n).unwrap();
        // 2026-12-01T00:00:21Z and 2026-07-11T22:59Z.
        assert_eq!(utc_offset_minutes(&tz("America/New_York"), 1_796_083_221_000), -300);
        assert_eq!(utc_offset_minutes(&tz("America/New_York"), 1_783_810_740_000), -240);
        assert_eq!(utc_offset_minutes(&tz("Asia/Kolkata"), 1_796_083_221_000), 330);
        assert_eq!(utc_offset_minutes(&TimeZone::UTC, 1_796_083_221_000), 0);
    }
}
