//! The pages in the visitor's language: the built-in translations, the languages a room offers,
//! and the choice per request from `Accept-Language` ([`Languages`]).
//!
//! Seventeen languages are built in ([`BUILT_IN_LANGUAGES`]); each is a [`Texts`] in a file of
//! its own here. An app's own texts for a language replace the built-in ones for it
//! ([`Languages::with_texts`]), and an app that wants one language for everyone says so
//! ([`Languages::only`] with one tag).

mod accept;
pub(crate) mod plural;

mod ar;
mod de;
mod es;
mod fa;
mod fr;
mod id;
mod it;
mod ja;
mod ko;
mod nl;
mod pl;
mod pt_br;
mod ru;
mod tr;
mod zh_cn;
mod zh_tw;

use std::sync::Arc;

use super::Texts;
use crate::ConfigError;

/// The languages the pages speak out of the box, by their BCP 47 tags.
pub const BUILT_IN_LANGUAGES: [&str; 17] = [
    "en", "es", "de", "fr", "it", "pt-BR", "nl", "pl", "tr", "ru", "ar", "fa", "ja", "ko", "zh-CN",
    "zh-TW", "id",
];

/// The built-in texts of `tag` (as in [`BUILT_IN_LANGUAGES`], any case), or `None`.
pub fn built_in(tag: &str) -> Option<Texts> {
    let tag = BUILT_IN_LANGUAGES
        .iter()
        .find(|t| t.eq_ignore_ascii_case(tag))?;
    Some(match *tag {
        "es" => es::texts(),
        "de" => de::texts(),
        "fr" => fr::texts(),
        "it" => it::texts(),
        "pt-BR" => pt_br::texts(),
        "nl" => nl::texts(),
        "pl" => pl::texts(),
        "tr" => tr::texts(),
        "ru" => ru::texts(),
        "ar" => ar::texts(),
        "fa" => fa::texts(),
        "ja" => ja::texts(),
        "ko" => ko::texts(),
        "zh-CN" => zh_cn::texts(),
        "zh-TW" => zh_tw::texts(),
        "id" => id::texts(),
        _ => Texts::default(),
    })
}

/// The languages a room's pages speak, and which one each visitor gets: the first of the
/// visitor's `Accept-Language` ranges (by `q`, RFC 4647 lookup: `de-CH` finds `de`, `zh-Hant`
/// finds `zh-TW`, `pt` finds `pt-BR`) that the room offers, else the default language.
///
/// By default every built-in language, English the default.
///
/// ```
/// use tower_waiting_room::response::{DefaultRenderer, Languages, Texts};
///
/// // Three languages, German the default; the shop's own German words.
/// let mut de = Languages::built_in("de").unwrap();
/// de.waiting_title = "Gleich geht's los".into();
/// let languages = Languages::only(["en", "de", "ar"])?
///     .default_language("de")?
///     .with_texts(de);
/// let renderer = DefaultRenderer::new().with_languages(languages);
/// # let _ = renderer;
/// # Ok::<(), tower_waiting_room::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Languages {
    /// The offered languages' texts, the default first.
    offered: Vec<Arc<Texts>>,
    /// Their tags, in the same order.
    tags: Vec<String>,
}

impl Default for Languages {
    fn default() -> Self {
        Self::all()
    }
}

impl Languages {
    /// Every built-in language, English the default.
    pub fn all() -> Self {
        Self::from_texts(BUILT_IN_LANGUAGES.iter().filter_map(|t| built_in(t)))
    }

    /// The built-in texts of `tag` ([`BUILT_IN_LANGUAGES`]), to change some words before
    /// [`with_texts`](Self::with_texts).
    pub fn built_in(tag: &str) -> Option<Texts> {
        built_in(tag)
    }

    /// Only these languages (tags of [`BUILT_IN_LANGUAGES`], any case), the first the default.
    /// One tag: that language for everyone. A tag that is not built in is
    /// [`ConfigError::UnknownLanguage`], unless the app's texts for it follow
    /// ([`with_texts`](Self::with_texts) adds a language too); no tag at all is too.
    pub fn only<I, S>(tags: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut texts = Vec::new();
        for tag in tags {
            let tag = tag.as_ref();
            let t = built_in(tag).ok_or_else(|| unknown(tag))?;
            if !texts.iter().any(|x: &Texts| x.lang == t.lang) {
                texts.push(t);
            }
        }
        if texts.is_empty() {
            return Err(unknown(""));
        }
        Ok(Self::from_texts(texts))
    }

    /// One language for everyone: these texts, whatever the visitor asks for.
    pub fn single(texts: Texts) -> Self {
        Self::from_texts([texts])
    }

    fn from_texts(texts: impl IntoIterator<Item = Texts>) -> Self {
        let offered: Vec<Arc<Texts>> = texts.into_iter().map(Arc::new).collect();
        let tags = offered.iter().map(|t| t.lang.clone()).collect();
        Self { offered, tags }
    }

    /// The language visitors get when none of theirs is offered (one of the offered ones).
    pub fn default_language(mut self, tag: &str) -> Result<Self, ConfigError> {
        let at = self
            .tags
            .iter()
            .position(|t| t.eq_ignore_ascii_case(tag))
            .ok_or_else(|| unknown(tag))?;
        let texts = self.offered.remove(at);
        let t = self.tags.remove(at);
        self.offered.insert(0, texts);
        self.tags.insert(0, t);
        Ok(self)
    }

    /// The app's own texts for their language ([`Texts::lang`]): they replace the built-in
    /// ones for it, or add the language when the room did not offer it.
    pub fn with_texts(mut self, texts: Texts) -> Self {
        match self
            .tags
            .iter()
            .position(|t| t.eq_ignore_ascii_case(&texts.lang))
        {
            Some(at) => self.offered[at] = Arc::new(texts),
            None => {
                self.tags.push(texts.lang.clone());
                self.offered.push(Arc::new(texts));
            }
        }
        self
    }

    /// The offered languages' tags, the default first.
    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// The default language's texts.
    pub fn default_texts(&self) -> &Texts {
        &self.offered[0]
    }

    /// The texts for a visitor who sent `accept_language` (the header's value, or `None`).
    pub fn choose(&self, accept_language: Option<&str>) -> &Texts {
        if self.offered.len() > 1 {
            for range in accept_language.map(accept::ranges).unwrap_or_default() {
                if range == "*" {
                    break;
                }
                if let Some(tag) = accept::lookup(range, &self.tags) {
                    if let Some(at) = self.tags.iter().position(|t| t == tag) {
                        return &self.offered[at];
                    }
                }
            }
        }
        self.default_texts()
    }
}

fn unknown(tag: &str) -> ConfigError {
    ConfigError::UnknownLanguage {
        tag: tag.chars().take(35).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_visitor_gets_the_first_offered_language_they_accept() {
        let all = Languages::all();
        let lang = |h: &str| all.choose(Some(h)).lang.clone();
        assert_eq!(lang("de-DE,de;q=0.9,en;q=0.8"), "de");
        assert_eq!(lang("ja;q=0.5, ar"), "ar");
        assert_eq!(lang("zh-Hant-TW"), "zh-TW");
        assert_eq!(lang("pt-PT, en;q=0.5"), "pt-BR");
        assert_eq!(lang("sv, da"), "en", "none offered: the default");
        assert_eq!(lang("*"), "en");
        assert_eq!(lang("de;q=0, fr"), "fr");
        assert_eq!(all.choose(None).lang, "en");
    }

    #[test]
    fn a_room_offers_what_it_says_and_the_app_texts_win() {
        let mine = Texts {
            lang: "de".into(),
            waiting_title: "Gleich".into(),
            ..Texts::default()
        };
        let l = Languages::only(["en", "de"])
            .unwrap()
            .default_language("de")
            .unwrap()
            .with_texts(mine);
        assert_eq!(l.tags(), ["de", "en"]);
        assert_eq!(l.choose(Some("fr")).lang, "de", "not offered: the default");
        assert_eq!(l.choose(Some("de-AT")).waiting_title, "Gleich");
        assert_eq!(l.choose(Some("en")).lang, "en");
        assert!(matches!(
            Languages::only(["en", "xx"]),
            Err(ConfigError::UnknownLanguage { tag }) if tag == "xx"
        ));
        assert!(Languages::only(Vec::<String>::new()).is_err());
        assert!(Languages::only(["en"])
            .unwrap()
            .default_language("de")
            .is_err());
        let one = Languages::single(Texts::default());
        assert_eq!(
            one.choose(Some("de")).lang,
            "en",
            "one language for everyone"
        );
    }

    #[test]
    fn every_built_in_language_is_complete_and_its_own() {
        let en = Texts::default();
        for tag in BUILT_IN_LANGUAGES {
            let t = built_in(tag).unwrap();
            assert_eq!(t.lang, tag);
            assert_eq!(t.digits.chars().count(), 10, "{tag}");
            assert!(t.dir == "ltr" || t.dir == "rtl", "{tag}");
            assert_eq!(t.dir == "rtl", tag == "ar" || tag == "fa", "{tag}");
            if tag != "en" {
                assert_ne!(t.waiting_title, en.waiting_title, "{tag}");
            }
        }
    }
}
