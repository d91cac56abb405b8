//! A settings file's languages ([`crate::response::Languages`]): `languages`, the tags the
//! room's pages speak (separated by spaces or commas; `all` or left out: every built-in one), and
//! `default_language`, the one visitors get when none of theirs is offered (the first of
//! `languages` unless said). From the environment, `{PREFIX}_LANGUAGES` and
//! `{PREFIX}_DEFAULT_LANGUAGE`. A tag the pages cannot speak is the builder's
//! [`ConfigError::UnknownLanguage`] at `build`.

use crate::response::Languages;
use crate::vocab::ConfigError;

/// The file's keys for languages.
pub(crate) const LANGUAGES: &str = "languages";
pub(crate) const DEFAULT_LANGUAGE: &str = "default_language";

/// What a file or the environment says of languages.
#[derive(Clone, Debug, Default)]
pub(crate) struct LanguagesFile {
    pub(crate) languages: Option<String>,
    pub(crate) default: Option<String>,
}

impl LanguagesFile {
    /// The room's languages as the file gives them: none when it names none (the builder's
    /// default, every built-in language).
    pub(crate) fn read(&self) -> Option<Result<Languages, ConfigError>> {
        if self.languages.is_none() && self.default.is_none() {
            return None;
        }
        let languages = match self.languages.as_deref().map(str::trim) {
            None | Some("all") => Ok(Languages::all()),
            Some(tags) => Languages::only(tags.split([' ', ',', '\t']).filter(|t| !t.is_empty())),
        };
        Some(languages.and_then(|l| match &self.default {
            Some(tag) => l.default_language(tag.trim()),
            None => Ok(l),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(
        languages: Option<&str>,
        default: Option<&str>,
    ) -> Option<Result<Vec<String>, ConfigError>> {
        LanguagesFile {
            languages: languages.map(str::to_owned),
            default: default.map(str::to_owned),
        }
        .read()
        .map(|r| r.map(|l| l.tags().to_vec()))
    }

    #[test]
    fn a_file_names_the_languages_and_the_default() {
        assert!(read(None, None).is_none());
        assert_eq!(
            read(Some("en, de ar"), None).unwrap().unwrap(),
            ["en", "de", "ar"]
        );
        assert_eq!(
            read(Some("en de"), Some("de")).unwrap().unwrap(),
            ["de", "en"]
        );
        assert_eq!(read(Some("all"), Some("fr")).unwrap().unwrap()[0], "fr");
        assert_eq!(read(None, Some("ja")).unwrap().unwrap().len(), 17);
        assert!(matches!(
            read(Some("en klingon"), None),
            Some(Err(ConfigError::UnknownLanguage { .. }))
        ));
        assert!(
            read(Some("en"), Some("de")).unwrap().is_err(),
            "a default not offered"
        );
        assert!(
            read(Some(" , "), None).unwrap().is_err(),
            "no language at all"
        );
    }
}
