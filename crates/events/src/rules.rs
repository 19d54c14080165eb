//! Which Pi release's rules a projection follows, and which file versions exist.
//!
//! The transcript format is the same v3 in Pi 0.58.3 and Pi 1.6.0 (1.x only
//! adds entry types and fields), but the two build a context and plan a
//! compaction differently: 1.6 applies `context_edit` entries, replays system
//! messages, distrusts usage recorded before the latest compaction or edit,
//! re-summarises kept entries and counts every context message toward the
//! recent budget. Code that reproduces one of those decisions takes a
//! [`PiRules`] and keeps the differences in small functions named after Pi's.

/// The newest transcript version any Pi release writes (`CURRENT_SESSION_VERSION`,
/// 3 in both 0.58.3 and 1.6.0). A header above it is refused, never read as
/// if it were version 3.
pub const CURRENT_VERSION: f64 = 3.0;

/// The Pi release whose context and compaction rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum PiRules {
    /// `@mariozechner/pi-coding-agent` 0.58.3 (the `oracle/pi` baseline).
    #[default]
    V0_58,
    /// `@earendil-works/pi-coding-agent` 1.6.0 (`oracle/pi-1.6`).
    V1_6,
}

impl PiRules {
    /// Both rule sets, oldest first.
    pub const ALL: [PiRules; 2] = [PiRules::V0_58, PiRules::V1_6];

    /// The name the CLI and policy files use (`0.58`, `1.6`).
    pub fn name(self) -> &'static str {
        match self {
            PiRules::V0_58 => "0.58",
            PiRules::V1_6 => "1.6",
        }
    }

    /// The exact Pi release the rules were taken from (the oracle's `piVersion`).
    pub fn pi_version(self) -> &'static str {
        match self {
            PiRules::V0_58 => "0.58.3",
            PiRules::V1_6 => "1.6.0",
        }
    }

    /// True for the 1.x rules (projection with edits, system messages, ...).
    pub fn is_v1(self) -> bool {
        self == PiRules::V1_6
    }
}

impl std::fmt::Display for PiRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PiRules {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "0.58" | "0.58.3" => Ok(PiRules::V0_58),
            "1.6" | "1.6.0" => Ok(PiRules::V1_6),
            other => Err(format!("unknown Pi rules `{other}` (0.58, 1.6)")),
        }
    }
}

impl TryFrom<String> for PiRules {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<PiRules> for String {
    fn from(r: PiRules) -> String {
        r.name().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for rules in PiRules::ALL {
            assert_eq!(rules.name().parse::<PiRules>(), Ok(rules));
            assert_eq!(rules.pi_version().parse::<PiRules>(), Ok(rules));
        }
        assert_eq!(PiRules::default(), PiRules::V0_58);
        assert!("1.7".parse::<PiRules>().unwrap_err().contains("0.58, 1.6"));
    }
}
