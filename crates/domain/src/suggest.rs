//! "Did you mean …?": the closest of a set of known names to a misspelt
//! one, for errors about unknown keys and names.

/// Similarity (Jaro–Winkler, 0–1) a known name needs to be suggested; the
/// threshold clap uses for its own suggestions, which catches dropped,
/// doubled and swapped letters (`max_paralel`, `stagee`) without offering
/// unrelated names.
const MIN_SIMILARITY: f64 = 0.8;

/// The known name most like `input`, if any is close enough.
pub fn closest<'a>(input: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let input = input.to_ascii_lowercase();
    known
        .into_iter()
        .map(|name| (strsim::jaro_winkler(&input, name), name))
        .filter(|(score, _)| *score >= MIN_SIMILARITY)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEP: &[&str] = &[
        "component_type",
        "stage",
        "max_parallel",
        "timeout",
        "retry",
    ];

    #[test]
    fn typos_find_their_key() {
        assert_eq!(
            closest("max_paralel", STEP.iter().copied()),
            Some("max_parallel")
        );
        assert_eq!(
            closest("maxparallel", STEP.iter().copied()),
            Some("max_parallel")
        );
        assert_eq!(closest("Stage", STEP.iter().copied()), Some("stage"));
        assert_eq!(closest("timout", STEP.iter().copied()), Some("timeout"));
        assert_eq!(
            closest("componet_type", STEP.iter().copied()),
            Some("component_type")
        );
    }

    #[test]
    fn unrelated_names_get_no_suggestion() {
        assert_eq!(closest("owner", STEP.iter().copied()), None);
        assert_eq!(closest("", STEP.iter().copied()), None);
        assert_eq!(closest("x", std::iter::empty()), None);
    }
}
