//! The default HTML pages: self-contained, no external assets.

use std::fmt::Write as _;

use super::{group_thousands, RenderContext};
use crate::outcome::Rejection;

pub(super) fn render(rejection: &Rejection, cx: &RenderContext<'_>) -> String {
    let retry = rejection.retry_after().as_secs().max(1);
    let (title, body) = match *rejection {
        Rejection::Waiting {
            position, waiting, ..
        } => (
            "You are in line",
            format!(
                "<p class=\"big\" role=\"status\" aria-live=\"polite\" id=\"pos\">You are number \
                 <strong>{}</strong> in line</p><p id=\"ahead\">{} ahead of you, {} waiting in all.</p>\
                 <p class=\"small\">This page updates by itself. Keep it open; you will be let in \
                 when it is your turn.</p>",
                group_thousands(position),
                group_thousands(position.saturating_sub(1)),
                group_thousands(waiting),
            ),
        ),
        Rejection::Full { .. } => (
            "The line is full",
            "<p class=\"big\">So many people are waiting that the line is full.</p>\
             <p>Please come back a little later.</p>"
                .to_owned(),
        ),
        Rejection::Unavailable { .. } => (
            "Please try again soon",
            "<p class=\"big\">The waiting room cannot be reached right now.</p>\
             <p>This page tries again by itself.</p>"
                .to_owned(),
        ),
        Rejection::Busy { .. } => (
            "Very busy right now",
            "<p class=\"big\">The waiting room is very busy.</p>\
             <p>This page tries again in a moment.</p>"
                .to_owned(),
        ),
        // `Rejection` is non_exhaustive only for other crates.
    };
    let mut html = String::with_capacity(2048);
    let _ = write!(
        html,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex,nofollow">
<meta http-equiv="refresh" content="{retry}">
<title>{title}</title>
<style>
body{{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;background:#f4f5f7;color:#1b1f24;margin:0;display:flex;min-height:100vh;align-items:center;justify-content:center}}
main{{background:#fff;max-width:32rem;margin:1rem;padding:2rem;border-radius:12px;box-shadow:0 2px 12px rgba(0,0,0,.08)}}
h1{{font-size:1.4rem;margin-top:0}}.big{{font-size:1.25rem}}.small{{color:#4a525c;font-size:.9rem}}
button{{font:inherit;padding:.5rem 1rem;border:1px solid #8a939e;border-radius:6px;background:#fff;cursor:pointer}}
</style></head><body><main>
<h1>{title}</h1>
{body}
<form method="post" action="{leave}"><button type="submit">Leave the line</button></form>
</main>
<script>
(function(){{var s="{status}",back="{back}",wait={retry}*1000;
function poll(){{fetch(s,{{credentials:"same-origin",cache:"no-store"}}).then(function(r){{return r.json()}}).then(function(j){{
if(j.state==="admitted"){{location.replace(back);return}}
if(j.position){{var p=document.getElementById("pos");if(p)p.innerHTML="You are number <strong>"+j.position.toLocaleString()+"</strong> in line";
var a=document.getElementById("ahead");if(a)a.textContent=(j.position-1).toLocaleString()+" ahead of you, "+j.waiting.toLocaleString()+" waiting in all."}}
if(j.state==="unknown"){{location.replace(back);return}}
wait=(j.retry_after||2)*1000;setTimeout(poll,wait*(0.8+Math.random()*0.4))}}).catch(function(){{wait=Math.min(wait*2,60000);setTimeout(poll,wait)}})}}
setTimeout(poll,wait*(0.8+Math.random()*0.4));}})();
</script></body></html>"#,
        leave = cx.leave_path,
        status = cx.status_path,
        back = js_string(cx.return_to),
    );
    html
}

/// Escapes a path for a double-quoted JS string inside HTML.
fn js_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            'a'..='z'
            | 'A'..='Z'
            | '0'..='9'
            | '/'
            | '?'
            | '='
            | '-'
            | '_'
            | '.'
            | '~'
            | '%'
            | ','
            | ':'
            | '+' => out.push(c),
            _ => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_path_cannot_break_out_of_the_script() {
        let s = js_string("/a?x=\"</script><script>alert(1)</script>&y=1");
        assert!(!s.contains('"') && !s.contains('<') && !s.contains('&'));
    }
}
