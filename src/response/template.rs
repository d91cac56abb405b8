//! Page templates with named placeholders.

use crate::config::ConfigError;

/// An HTML page with named placeholders, for the [`DefaultRenderer`](super::DefaultRenderer).
///
/// `{name}` is replaced by the value of that name, **HTML-escaped**, so values are safe in text
/// and in quoted attribute values. Unknown names are refused when the template is made, not when
/// a visitor meets it. `{{` and `}}` are literal braces; any other brace (CSS rules, scripts) is
/// kept as it is.
///
/// | placeholder | value |
/// |---|---|
/// | `{lang}` | the page's language ([`Texts::lang`](super::Texts::lang)) |
/// | `{dir}` | its writing direction, `ltr` or `rtl` ([`Texts::dir`](super::Texts::dir)) |
/// | `{title}`, `{heading}` | the page's heading |
/// | `{eyebrow}` | the small label above the heading ("Waiting room") |
/// | `{message}` | the page's message (on the waiting page: that it updates by itself) |
/// | `{room}` | the room's id |
/// | `{state}` | `waiting`, `full`, `unavailable`, `busy`, `limited`, `challenge` or `left` |
/// | `{position}` | the place in line, formatted (`1,342`); empty on other pages |
/// | `{position_text}` | the sentence "You are number 1,342 in line" |
/// | `{position_before}`, `{position_after}` | that sentence's text before and after the number |
/// | `{ahead}`, `{ahead_label}` | how many are ahead (`1,341`), and its label |
/// | `{waiting}`, `{waiting_label}` | how many are in line in all, and its label |
/// | `{eta}`, `{eta_label}` | the estimated wait as text ("About 12 min"), and its label |
/// | `{eta_seconds}` | the estimated wait in seconds; empty when unknown |
/// | `{retry_after}` | seconds until the page should check again |
/// | `{status_url}`, `{leave_url}` | the room's status (GET) and leave (POST) endpoints |
/// | `{return_to}` | the path and query the visitor asked for |
/// | `{leave_button}`, `{link_text}` | the leave button's text; the page's link text |
/// | `{data}` | what the default script needs (JSON, for the `data-twr` attribute) |
/// | `{style}`, `{script}` | the default page's CSS and JavaScript (constants, not escaped) |
///
/// The default script (`{script}`) reads `data-twr="{data}"` from the element with
/// `id="twr"`, polls the status endpoint and updates the elements with ids `twr-heading`,
/// `twr-position-number`, `twr-ahead`, `twr-waiting`, `twr-eta` and `twr-note` where they exist; a form with
/// `id="twr-leave"` leaves the line without a page load. See the
/// [default templates](super::DefaultRenderer) for a complete example.
///
/// ```
/// use tower_waiting_room::response::{DefaultRenderer, PageTemplate};
///
/// let page = PageTemplate::new(
///     r#"<!doctype html><html lang="{lang}"><title>{title}</title>
///        <main id="twr" data-twr="{data}"><h1 id="twr-heading">{heading}</h1>
///        <p role="status">{position_text}, <span id="twr-eta">{eta}</span></p>
///        <form id="twr-leave" method="post" action="{leave_url}"><button>{leave_button}</button></form>
///        </main><script>{script}</script>"#,
/// )?;
/// let renderer = DefaultRenderer::new().with_waiting_template(page);
/// # let _ = renderer;
/// assert!(PageTemplate::new("<p>{no_such_thing}</p>").is_err());
/// # Ok::<_, tower_waiting_room::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageTemplate {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Field(Field),
}

macro_rules! fields {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// A placeholder of a [`PageTemplate`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Field { $($variant),* }

        impl Field {
            fn parse(name: &str) -> Option<Self> {
                match name { $($name => Some(Field::$variant),)* _ => None }
            }
        }
    };
}

fields! {
    Lang => "lang",
    Dir => "dir",
    Title => "title",
    Eyebrow => "eyebrow",
    Heading => "heading",
    Message => "message",
    Room => "room",
    State => "state",
    Position => "position",
    PositionText => "position_text",
    PositionBefore => "position_before",
    PositionAfter => "position_after",
    Ahead => "ahead",
    AheadLabel => "ahead_label",
    Waiting => "waiting",
    WaitingLabel => "waiting_label",
    Eta => "eta",
    EtaLabel => "eta_label",
    EtaSeconds => "eta_seconds",
    RetryAfter => "retry_after",
    StatusUrl => "status_url",
    LeaveUrl => "leave_url",
    ReturnTo => "return_to",
    LeaveButton => "leave_button",
    LinkText => "link_text",
    Data => "data",
    Style => "style",
    Script => "script",
}

impl PageTemplate {
    /// Parses `html`; see the [type docs](Self) for the placeholders. A name that is none of
    /// them is [`ConfigError::UnknownPlaceholder`].
    pub fn new(html: impl AsRef<str>) -> Result<Self, ConfigError> {
        let html = html.as_ref();
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut rest = html;
        while let Some(i) = rest.find(['{', '}']) {
            text.push_str(&rest[..i]);
            let tail = &rest[i..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                text.push(tail.as_bytes()[0] as char);
                rest = &tail[2..];
                continue;
            }
            if let Some(after) = tail.strip_prefix('{') {
                let name_len = after
                    .bytes()
                    .take_while(|b| b.is_ascii_lowercase() || *b == b'_')
                    .count();
                if name_len > 0 && after[name_len..].starts_with('}') {
                    let name = &after[..name_len];
                    let field =
                        Field::parse(name).ok_or_else(|| ConfigError::UnknownPlaceholder {
                            name: name.to_owned(),
                        })?;
                    if !text.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut text)));
                    }
                    parts.push(Part::Field(field));
                    rest = &after[name_len + 1..];
                    continue;
                }
            }
            // Any other brace is literal.
            text.push(tail.as_bytes()[0] as char);
            rest = &tail[1..];
        }
        text.push_str(rest);
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(Self { parts })
    }

    /// Fills in the placeholders with `value`'s text, escaped; `{style}` and `{script}` (the
    /// crate's own constants) are inserted as they are.
    pub(crate) fn render(&self, mut value: impl FnMut(Field) -> String) -> String {
        let mut out = String::with_capacity(8 * 1024);
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Field(f @ (Field::Style | Field::Script)) => out.push_str(&value(*f)),
                Part::Field(f) => escape_into(&mut out, &value(*f)),
            }
        }
        out
    }
}

/// HTML-escapes `s` for text and quoted attribute values.
pub(crate) fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_escaped() {
        let t =
            PageTemplate::new("<p title=\"{room}\">{heading}</p>{script} {{x}} {} {A}").unwrap();
        let out = t.render(|f| match f {
            Field::Room => "a\"b".into(),
            Field::Heading => "<script>alert('x')&</script>".into(),
            Field::Script => "if(a<b){}".into(),
            _ => unreachable!(),
        });
        assert_eq!(
            out,
            "<p title=\"a&quot;b\">&lt;script&gt;alert(&#39;x&#39;)&amp;&lt;/script&gt;</p>\
             if(a<b){} {x} {} {A}"
        );
    }

    #[test]
    fn css_braces_are_literal_and_unknown_names_are_refused() {
        let t = PageTemplate::new("body{margin:0} .x{color:red}").unwrap();
        assert_eq!(t.render(|_| unreachable!()), "body{margin:0} .x{color:red}");
        let err = PageTemplate::new("{posittion}").unwrap_err();
        assert_eq!(
            err,
            ConfigError::UnknownPlaceholder {
                name: "posittion".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "unknown placeholder {posittion} in a page template"
        );
    }
}
