//! Where in a text a byte offset is, as people count: lines and columns from 1, columns in characters (what an
//! editor shows), so an error can say `line 12, column 5` of the file the user wrote.

/// The 1-based line and column (in characters) of byte `offset` in `text`. An offset inside a character counts
/// as that character's start; one past the end is the end.
///
/// ```
/// use ballast_human::line_column;
///
/// assert_eq!(line_column("a = 1\nbé = 2\n", 9), (2, 3));
/// ```
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_characters() {
        let text = "a\nbé\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 2), (2, 1));
        assert_eq!(line_column(text, 5), (2, 3), "é is two bytes, one column");
        assert_eq!(line_column(text, 4), (2, 2), "inside é: back to its start");
        assert_eq!(line_column(text, 99), (3, 1));
    }
}
