//! Where a value is in a TOML text: the line an error points at.

use ballast_human::line_column;

/// Where the values of a TOML text are: the text parsed once (with spans), asked for the line of many paths.
pub(crate) struct Lines<'t> {
    text: &'t str,
    document: Option<toml::Spanned<toml::de::DeTable<'t>>>,
}

impl<'t> Lines<'t> {
    /// The values of `text` (none, when it does not parse).
    pub(crate) fn of(text: &'t str) -> Self {
        Lines {
            text,
            document: toml::de::DeTable::parse(text).ok(),
        }
    }

    /// The 1-based line of the value at `path` (`tools[1].retry.max_attempts`): of the value itself, or of the
    /// deepest table or array on the path that exists (a missing key is reported where its table is). `None` when
    /// the text does not parse or the path names nothing in it.
    pub(crate) fn line(&self, path: &str) -> Option<usize> {
        let offset = offset_of(self.document.as_ref()?.get_ref(), path)?;
        Some(line_column(self.text, offset).0)
    }
}

/// The byte offset of the deepest value on `path` that `document` holds.
fn offset_of(document: &toml::de::DeTable<'_>, path: &str) -> Option<usize> {
    use toml::de::DeValue;
    let mut table = document;
    let mut found = None;
    'path: for segment in path.split('.') {
        let (key, indices) = segment.split_once('[').unwrap_or((segment, ""));
        let Some(mut value) = table.get(key) else {
            break;
        };
        for index in indices.split('[').filter(|i| !i.is_empty()) {
            found = Some(value.span().start);
            let item =
                index
                    .trim_end_matches(']')
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| match value.get_ref() {
                        DeValue::Array(items) => items.get(i),
                        _ => None,
                    });
            match item {
                Some(item) => value = item,
                None => break 'path,
            }
        }
        found = Some(value.span().start);
        match value.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => break,
        }
    }
    found
}

/// [`Lines::line`] for one path.
pub(crate) fn line_of(text: &str, path: &str) -> Option<usize> {
    Lines::of(text).line(path)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A config whose values sit on known lines (the load tests use it too).
    pub(crate) const TEXT: &str = "version = 1\n\n[server]\nlisten = \"127.0.0.1:8080\"\n\n[[tools]]\nname = \"a\"\n\n[[tools]]\nname = \"b\"\n\
                        retry = { max_attempts = 0 }\n";

    #[test]
    fn a_path_finds_its_line() {
        assert_eq!(line_of(TEXT, "version"), Some(1));
        assert_eq!(line_of(TEXT, "server.listen"), Some(4));
        assert_eq!(line_of(TEXT, "tools[1].name"), Some(10));
        assert_eq!(line_of(TEXT, "tools[1].retry.max_attempts"), Some(11));
        assert_eq!(line_of(TEXT, "nothing.here"), None);
        assert_eq!(
            line_of(TEXT, "tools[1].upstream"),
            Some(9),
            "missing: where its table is"
        );
    }
}
