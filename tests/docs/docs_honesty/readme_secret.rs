//! The README's secret recipe: run under `sh`, it yields a key the demo's `--secret` accepts.

use super::read;

use tower_waiting_room::SigningKey;

// ===== README: the secret recipe =====

#[cfg(unix)]
#[test]
fn readme_secret_recipe_makes_a_key_the_demo_accepts() {
    let readme = read("README.md");
    let recipes: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("secret=$("))
        .collect();
    assert!(!recipes.is_empty(), "README.md: no `secret=$(...)` recipe");
    for recipe in recipes {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{recipe}\nprintf '%s' \"$secret\""))
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{recipe}: {out:?}");
        let secret = String::from_utf8(out.stdout).unwrap();
        // The demo's rule for --secret: at least 64 hex digits, then SigningKey::from_hex.
        assert!(
            secret.len() >= 64 && secret.bytes().all(|b| b.is_ascii_hexdigit()),
            "{recipe}: {secret:?} is not 64+ hex digits"
        );
        SigningKey::from_hex("k1", &secret)
            .unwrap_or_else(|e| panic!("{recipe}: the demo would refuse {secret:?}: {e}"));
    }
}
