//! A text's form for a number, by the CLDR plural rules of its language (`intl_pluralrules`,
//! the rules Fluent uses: the same data browsers' `Intl.PluralRules` uses, so the page's script
//! picks the same form), and numbers written with the language's digits and grouping.

use intl_pluralrules::{PluralCategory, PluralRuleType, PluralRules};
use unic_langid::LanguageIdentifier;

/// The CLDR category of `n` in `lang`: `other` for a language the rules do not know.
pub(crate) fn category(lang: &str, n: u64) -> &'static str {
    // The rules of the whole tag where the CLDR has them (`pt-PT`), else of its language
    // (`pt-BR` has Portuguese's).
    let rules = lang.parse::<LanguageIdentifier>().ok().and_then(|id| {
        let language = LanguageIdentifier::from_parts(id.language, None, None, &[]);
        PluralRules::create(id, PluralRuleType::CARDINAL)
            .or_else(|_| PluralRules::create(language, PluralRuleType::CARDINAL))
            .ok()
    });
    match rules.and_then(|r| r.select(n).ok()) {
        Some(PluralCategory::ZERO) => "zero",
        Some(PluralCategory::ONE) => "one",
        Some(PluralCategory::TWO) => "two",
        Some(PluralCategory::FEW) => "few",
        Some(PluralCategory::MANY) => "many",
        _ => "other",
    }
}

/// The form of `text` for a number of category `category` (see [`Texts`](super::super::Texts):
/// `one:...|other:...`): that category's, else `other`'s, else the whole text when it gives
/// no forms.
pub(crate) fn form<'t>(text: &'t str, category: &str) -> &'t str {
    if !has_forms(text) {
        return text;
    }
    let mut other = None;
    for part in text.split('|') {
        if let Some((cat, form)) = part.split_once(':') {
            if cat == category {
                return form;
            }
            if cat == "other" {
                other = Some(form);
            }
        }
    }
    other.unwrap_or(text)
}

/// Whether `text` gives plural forms: it starts with a category and a colon.
pub(crate) fn has_forms(text: &str) -> bool {
    ["zero:", "one:", "two:", "few:", "many:", "other:"]
        .iter()
        .any(|c| text.starts_with(c))
}

/// `n` with `digits` (the ten of the language) in groups of three joined by `sep`, from
/// `grouping_from` on.
pub(crate) fn number(n: u64, digits: &str, sep: &str, grouping_from: u64) -> String {
    let ascii = if n >= grouping_from {
        super::super::group_thousands(n, sep)
    } else {
        n.to_string()
    };
    let digits: Vec<char> = digits.chars().collect();
    if digits.len() != 10 || digits.iter().copied().eq('0'..='9') {
        return ascii;
    }
    ascii
        .chars()
        .map(|c| match c.to_digit(10) {
            Some(d) => digits[d as usize],
            None => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_follow_cldr() {
        assert_eq!(category("en", 1), "one");
        assert_eq!(category("en", 2), "other");
        assert_eq!(
            [1, 2, 5, 22, 25].map(|n| category("pl", n)),
            ["one", "few", "many", "few", "many"]
        );
        assert_eq!(
            [1, 3, 11, 21, 101].map(|n| category("ru", n)),
            ["one", "few", "many", "one", "one"]
        );
        assert_eq!(
            [0, 1, 2, 3, 11, 100].map(|n| category("ar", n)),
            ["zero", "one", "two", "few", "many", "other"]
        );
        assert_eq!(category("ja", 1), "other");
        assert_eq!(category("pt-BR", 0), "one");
        assert_eq!(category("zh-TW", 1), "other");
        assert_eq!(category("not a tag", 1), "other");
    }

    #[test]
    fn a_text_gives_the_form_of_its_number() {
        let t = "one:{n} minuta|few:{n} minuty|many:{n} minut|other:{n} minuty";
        assert_eq!(form(t, "one"), "{n} minuta");
        assert_eq!(form(t, "few"), "{n} minuty");
        assert_eq!(form(t, "many"), "{n} minut");
        assert_eq!(form(t, "two"), "{n} minuty", "else other");
        assert_eq!(form("About {n} min", "one"), "About {n} min", "no forms");
        assert_eq!(
            form("time: 4|5", "one"),
            "time: 4|5",
            "a colon later is no form"
        );
        assert_eq!(
            form("one:x", "other"),
            "one:x",
            "no other: the text as it is"
        );
    }

    #[test]
    fn numbers_are_written_as_the_language_writes_them() {
        assert_eq!(number(1_342, "0123456789", ",", 1_000), "1,342");
        assert_eq!(number(1_342, "0123456789", "\u{a0}", 10_000), "1342");
        assert_eq!(
            number(13_420, "0123456789", "\u{a0}", 10_000),
            "13\u{a0}420"
        );
        assert_eq!(number(1_234, "٠١٢٣٤٥٦٧٨٩", "\u{66c}", 1_000), "١\u{66c}٢٣٤");
        assert_eq!(number(7, "۰۱۲۳۴۵۶۷۸۹", "\u{66c}", 1_000), "۷");
        assert_eq!(
            number(5, "bad", ",", 1_000),
            "5",
            "digits that are not ten: ASCII"
        );
    }
}
