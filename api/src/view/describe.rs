//! An event in domain words, with each node's enrolled name.

use model::controller::{Event, Roster};
use model::NodeId;

/// An event in domain words with node names: each model node id in the
/// text (`node-a` … `node-z`, `node-26` …) becomes the node's enrolled
/// name, in one pass over the text (O(text · log n), not one replace per
/// node of the fleet). Quoted text (an enrolled name) is left as it is.
pub fn describe(roster: &Roster, event: &Event) -> String {
    let text = event.to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    let mut quoted = false;
    while let Some(at) = rest.find(['"', 'n']) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if rest.starts_with('"') {
            quoted = !quoted;
            out.push('"');
            rest = &rest[1..];
            continue;
        }
        let boundary = out
            .chars()
            .last()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'));
        match (quoted || !boundary, node_token(rest)) {
            (false, Some((node, len))) => {
                out.push_str(&roster.display_name(node));
                rest = &rest[len..];
            }
            _ => {
                out.push('n');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The model node id `text` starts with (as `NodeId`'s `Display` prints
/// it) and its length in bytes.
fn node_token(text: &str) -> Option<(NodeId, usize)> {
    let tail = text.strip_prefix("node-")?;
    let word_len = tail
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or(tail.len());
    let word = &tail[..word_len];
    let node = match word.as_bytes() {
        [letter] if letter.is_ascii_lowercase() => NodeId(u32::from(letter - b'a')),
        digits if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) => {
            let n: u32 = word.parse().ok()?;
            // Below 26 the id prints as a letter: digits there are a name.
            if n < 26 {
                return None;
            }
            NodeId(n)
        }
        _ => return None,
    };
    Some((node, "node-".len() + word_len))
}

#[cfg(test)]
mod tests {
    use super::describe;
    use model::controller::{Event, Labels, Roster};
    use model::{NodeId, OpId};

    fn roster(names: &[&str]) -> Roster {
        let mut roster = Roster::default();
        for (i, name) in names.iter().enumerate() {
            roster.fold(&Event::NodeEnrolled {
                node: NodeId(i as u32),
                name: name.to_string(),
                labels: Labels::new(),
                public: "127.0.0.1:1".into(),
            });
        }
        roster
    }

    #[test]
    fn describe_names_every_node_once_and_leaves_quoted_names_alone() {
        // Names that look like other nodes' ids must not be renamed twice.
        let mut names: Vec<String> = (0..30).map(|i| format!("edge-{i}")).collect();
        names[0] = "node-b".into();
        names[1] = "node-27".into();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let roster = roster(&refs);
        let foreign = Event::ForeignMessageIgnored {
            node: NodeId(0),
            op: OpId(3),
            owner: Some(NodeId(1)),
        };
        assert_eq!(
            describe(&roster, &foreign),
            "node-b spoke about node-27's op op3: ignored (a node cannot speak for another)"
        );
        let late = Event::LateReportIgnored {
            node: NodeId(27),
            op: OpId(9),
        };
        assert_eq!(
            describe(&roster, &late),
            "late report from edge-27 for op9 ignored"
        );
        let enrolled = Event::NodeEnrolled {
            node: NodeId(2),
            name: "node-a".into(),
            labels: Labels::new(),
            public: "127.0.0.1:1".into(),
        };
        assert_eq!(
            describe(&roster, &enrolled),
            "edge-2 enrolled as \"node-a\", labels [], public route 127.0.0.1:1"
        );
        // A node never enrolled keeps its model id.
        let ghost = Event::NodeRetired { node: NodeId(40) };
        assert_eq!(
            describe(&Roster::default(), &ghost),
            "node-40 retired: nothing more is granted to it"
        );
    }
}
