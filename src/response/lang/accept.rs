//! `Accept-Language` (RFC 9110 §12.5.4) read as RFC 4647's *lookup*: the visitor's language
//! ranges by preference (`q`), each tried as it is and then shortened a subtag at a time
//! (`de-CH-1996`, `de-CH`, `de`) against the languages the room offers; the first offered one
//! wins, and when none does, the room's default.
//!
//! A few ranges map onto the tag the room offers for them: Chinese by script or region
//! (`zh-Hant`, `zh-TW`, `zh-HK`, `zh-MO` are `zh-TW`; `zh-Hans`, `zh-CN`, `zh-SG` and plain `zh`
//! are `zh-CN`), and Portuguese falls back to `pt-BR` (`pt`, `pt-PT`). `*` matches any language:
//! it picks the default, as lookup does.
//!
//! The header is the visitor's, so it is read within bounds: its first 4 KB, at most 32 ranges
//! (later ones are ignored), each range at most 35 characters of letters, digits and `-`. A
//! range or `q` that is not one is skipped, never an error: a hostile header gets the default
//! language, never a 500.

/// The most bytes of the header read.
const MAX_HEADER: usize = 4 * 1024;
/// The most ranges read.
const MAX_RANGES: usize = 32;
/// The longest range read (RFC 5646's longest well-formed tags stay under it).
const MAX_RANGE: usize = 35;

/// The visitor's ranges, most preferred first (ties in the header's order), `q=0` left out.
pub(super) fn ranges(header: &str) -> Vec<&str> {
    let header = match header.char_indices().nth(MAX_HEADER) {
        Some((at, _)) => &header[..at],
        None => header,
    };
    let mut out: Vec<(&str, u16)> = Vec::new();
    for item in header.split(',').take(MAX_RANGES) {
        let mut parts = item.split(';');
        let range = parts.next().unwrap_or("").trim();
        if !well_formed(range) {
            continue;
        }
        let mut q = Some(1000);
        for param in parts {
            let param = param.trim();
            if let Some(value) = param
                .strip_prefix("q=")
                .or_else(|| param.strip_prefix("Q="))
            {
                q = qvalue(value.trim());
            }
        }
        match q {
            Some(q) if q > 0 => out.push((range, q)),
            _ => {}
        }
    }
    // Stable: equal weights keep the header's order.
    out.sort_by_key(|r| std::cmp::Reverse(r.1));
    out.into_iter().map(|(range, _)| range).collect()
}

/// A language range: `*`, or subtags of 1 to 8 letters and digits joined by `-`.
fn well_formed(range: &str) -> bool {
    range == "*"
        || (!range.is_empty()
            && range.len() <= MAX_RANGE
            && range.split('-').all(|t| {
                (1..=8).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_alphanumeric())
            }))
}

/// A `qvalue` (`0`, `0.5`, `1.000`) in thousandths; `None` for anything else.
fn qvalue(value: &str) -> Option<u16> {
    let (int, frac) = value.split_once('.').unwrap_or((value, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_value = format!("{frac:0<3}").parse::<u16>().ok()?;
    match int {
        "0" => Some(frac_value),
        "1" if frac_value == 0 => Some(1000),
        _ => None,
    }
}

/// The tag among `offered` (case as offered) that `range` looks up: the range itself, then
/// shorter, with the mappings of the module docs; `None` when none is offered.
pub(super) fn lookup<'a>(range: &str, offered: &'a [String]) -> Option<&'a str> {
    let find = |tag: &str| {
        offered
            .iter()
            .find(|o| o.eq_ignore_ascii_case(tag))
            .map(String::as_str)
    };
    let lower = range.to_ascii_lowercase();
    // A Chinese range names its script (by itself or by its region): the tag of that script
    // or nothing, never the other script's by shortening to `zh`.
    if lower.starts_with("zh-") {
        if let Some(tag) = mapped(&lower) {
            return find(tag);
        }
    }
    let mut candidate = lower.as_str();
    loop {
        if let Some(tag) = find(candidate).or_else(|| mapped(candidate).and_then(find)) {
            return Some(tag);
        }
        let (shorter, _) = candidate.rsplit_once('-')?;
        // RFC 4647 3.4: a single-letter subtag (an extension's singleton) goes with the one
        // after it.
        candidate = match shorter.rsplit_once('-') {
            Some((before, last)) if last.len() == 1 => before,
            _ => shorter,
        };
    }
}

/// What a range stands for among the built-in tags, when that is not itself.
fn mapped(range: &str) -> Option<&'static str> {
    Some(match range {
        "zh-hant" | "zh-tw" | "zh-hk" | "zh-mo" => "zh-TW",
        "zh-hans" | "zh-cn" | "zh-sg" | "zh" => "zh-CN",
        "pt" | "pt-pt" => "pt-BR",
        _ => {
            // Script before region (zh-Hant-HK, zh-Hans-CN): the script decides.
            if range.starts_with("zh-hant-") {
                "zh-TW"
            } else if range.starts_with("zh-hans-") {
                "zh-CN"
            } else {
                return None;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(tags: &[&str]) -> Vec<String> {
        tags.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn ranges_go_by_preference_and_q_zero_is_no() {
        assert_eq!(ranges("de-CH, fr;q=0.7, en;q=0.9"), ["de-CH", "en", "fr"]);
        assert_eq!(ranges("en;q=0, de"), ["de"]);
        assert_eq!(
            ranges("fr;q=0.5, de;q=0.5"),
            ["fr", "de"],
            "ties keep their order"
        );
        assert_eq!(ranges("*;q=0.1, ja"), ["ja", "*"]);
        assert_eq!(ranges(" ES ; q=1.000 "), ["ES"]);
    }

    #[test]
    fn malformed_ranges_and_q_values_are_skipped() {
        for bad in [
            "de;q=2",
            "de;q=0.1234",
            "de;q=-1",
            "de;q=abc",
            "de;q=1.5",
            "de;q=",
            "de;q=.5",
        ] {
            assert_eq!(ranges(bad), Vec::<&str>::new(), "{bad}");
        }
        assert_eq!(ranges("d_e, ja"), ["ja"]);
        assert_eq!(ranges("toolongsubtag-x, ko"), ["ko"]);
        assert_eq!(ranges(",,;;,;q=1,ar"), ["ar"]);
        assert!(ranges("").is_empty());
    }

    #[test]
    fn a_hostile_header_is_read_within_bounds() {
        let long = "a-".repeat(4_000) + "de";
        assert!(ranges(&long).is_empty());
        let many: String = (0..1_000).map(|_| "xx;q=0.1,").collect::<String>() + "de";
        let got = ranges(&many);
        assert_eq!(got.len(), MAX_RANGES, "at most {MAX_RANGES} ranges");
        assert!(!got.contains(&"de"), "past the bound: not read");
        let huge = format!("{}, fr", "x".repeat(10_000));
        assert!(ranges(&huge).is_empty(), "past 4 KB: not read");
        assert!(ranges("é, ü;q=0.5").is_empty());
    }

    /// RFC 4647 3.4's lookup: the range, then shorter, never longer or sideways.
    #[test]
    fn lookup_shortens_the_range_a_subtag_at_a_time() {
        let o = offered(&["en", "de", "fr", "zh-CN", "zh-TW", "pt-BR", "es"]);
        assert_eq!(lookup("de-CH-1996", &o), Some("de"));
        assert_eq!(lookup("DE", &o), Some("de"));
        assert_eq!(lookup("en-US", &o), Some("en"));
        assert_eq!(lookup("es-419", &o), Some("es"));
        assert_eq!(lookup("zh-Hant", &o), Some("zh-TW"));
        assert_eq!(lookup("zh-Hant-HK", &o), Some("zh-TW"));
        assert_eq!(lookup("zh-HK", &o), Some("zh-TW"));
        assert_eq!(lookup("zh-Hans-CN", &o), Some("zh-CN"));
        assert_eq!(lookup("zh", &o), Some("zh-CN"));
        assert_eq!(lookup("zh-SG", &o), Some("zh-CN"));
        assert_eq!(lookup("pt", &o), Some("pt-BR"));
        assert_eq!(lookup("pt-PT", &o), Some("pt-BR"));
        assert_eq!(lookup("fr-x-private", &o), Some("fr"));
        assert_eq!(lookup("ja", &o), None);
        assert_eq!(lookup("e", &o), None);
        assert_eq!(lookup("*", &o), None, "the caller picks the default for *");
        let only_pt = offered(&["pt-BR"]);
        assert_eq!(lookup("pt-BR", &only_pt), Some("pt-BR"));
        let without_zh_tw = offered(&["zh-CN"]);
        assert_eq!(
            lookup("zh-TW", &without_zh_tw),
            None,
            "never sideways to another script"
        );
    }
}
