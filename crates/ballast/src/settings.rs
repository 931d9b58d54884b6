//! What the builders share: settings given in code are checked by the one rule set, ballast-config's
//! validation, exactly as a TOML file's are.
//!
//! A builder fills a typed [`Config`] (starting from the typed defaults validation itself gives an omitted key),
//! writes it back to its raw form and validates that: a client built in code is one a config file could have
//! described, and no rule is restated here. The errors' paths are then renamed to the builder's fields
//! (`tools[0].retry.max_attempts` -> `retry.max_attempts`, `server.body_limit` -> `body_limit`).

use ballast_config::{Config, ConfigErrors, RawConfig, validate};

/// `config` as validation returns it, or every rule it breaks with paths relative to `root` (`tools[0]`).
pub(crate) fn validated(config: &Config, root: &str) -> Result<Config, ConfigErrors> {
    validate(&RawConfig::from(config)).map_err(|errors| errors.map_paths(|path| builder_path(path, root)))
}

/// A config path as the builder names the field: relative to `root`, or to `server`.
fn builder_path(path: &str, root: &str) -> String {
    let relative = |prefix: &str| path.strip_prefix(prefix)?.strip_prefix('.');
    relative(root)
        .or_else(|| relative("server"))
        .unwrap_or(path)
        .to_owned()
}

/// One line per error, each naming what was built: `tool "lookup_order": concurrency: 0 must be at least 1`.
pub(crate) fn refused(kind: &str, name: &str, errors: &ConfigErrors) -> String {
    let lines: Vec<String> = (errors.errors().iter())
        .map(|error| format!("{kind} {name:?}: {error}"))
        .collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::builder_path;

    #[test]
    fn paths_read_as_the_builders_fields() {
        assert_eq!(
            builder_path("tools[0].retry.max_attempts", "tools[0]"),
            "retry.max_attempts"
        );
        assert_eq!(builder_path("server.body_limit", "tools[0]"), "body_limit");
        assert_eq!(builder_path("tools[1].name", "tools[0]"), "tools[1].name");
        assert_eq!(
            builder_path("models[0].deployments[1].base_url", "models[0]"),
            "deployments[1].base_url"
        );
    }
}
