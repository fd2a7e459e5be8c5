//! A plain text table: a header row, columns padded to their widest cell, numbers
//! right-aligned.

/// Rows of cells under a header.
#[derive(Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these column names.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are empty, extra cells are dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// The table as lines, each ending in a newline, without trailing spaces.
    pub fn render(&self) -> String {
        let n = self.headers.len();
        let mut width = vec![0usize; n];
        // A column is numeric if it has a number and nothing but numbers, `-` or blanks.
        let mut numeric = vec![true; n];
        let mut has_number = vec![false; n];
        for (i, h) in self.headers.iter().enumerate() {
            width[i] = h.chars().count();
        }
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
                let number = c.parse::<f64>().is_ok();
                has_number[i] |= number;
                numeric[i] &= number || c.is_empty() || c == "-";
            }
        }
        for (x, h) in numeric.iter_mut().zip(&has_number) {
            *x &= *h;
        }
        let mut out = String::new();
        let mut line = |cells: &[String]| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    l.push_str("  ");
                }
                let pad = width[i] - c.chars().count();
                if numeric[i] {
                    l.extend(std::iter::repeat_n(' ', pad));
                    l.push_str(c);
                } else {
                    l.push_str(c);
                    l.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(l.trim_end());
            out.push('\n');
        };
        line(&self.headers);
        for r in &self.rows {
            line(r);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_numbers_go_right() {
        let mut t = Table::new(&["NAME", "VALUE"]);
        t.row(vec!["rx_frames".into(), "7".into()]);
        t.row(vec!["tx".into(), "12345".into()]);
        t.row(vec!["short".into()]);
        t.row(vec!["x".into(), "-".into()]);
        assert_eq!(
            t.render(),
            "NAME       VALUE\nrx_frames      7\ntx         12345\nshort\nx              -\n"
        );
    }

    #[test]
    fn an_empty_table_is_its_header() {
        assert_eq!(Table::new(&["A", "B"]).render(), "A  B\n");
    }
}
