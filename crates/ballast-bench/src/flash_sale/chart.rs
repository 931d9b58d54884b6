//! The SVG chart: successes and failures over time, per strategy — conversations ended so far, counted at every
//! tenth of a second (unscaled), one line per strategy and outcome. A strategy that fails fast rises at once; one
//! that waits out its timeouts rises late; a dead upstream shows as a flat stretch of successes.

use std::time::Duration;

use plotters::prelude::*;

use super::{DEADLINE_SLACK, Run};

/// Colours of the strategies' lines, in order (successes solid, failures dashed in the same colour).
const COLOURS: [RGBColor; 4] = [
    RGBColor(0xd9, 0x48, 0x1c),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
];

/// Points of a line: (unscaled seconds, conversations).
type Line = Vec<(f64, u32)>;

/// The chart of `runs` (grouped by strategy, seeds pooled), titled `title`, as an SVG document.
pub fn chart_svg(title: &str, runs: &[Run]) -> Result<String, String> {
    let mut strategies: Vec<&str> = Vec::new();
    for run in runs {
        if !strategies.contains(&run.strategy.as_str()) {
            strategies.push(&run.strategy);
        }
    }
    let scale = runs.first().map_or(1.0, |run| run.time_scale);
    let bucket = Duration::from_millis(100).mul_f64(scale);
    let series: Vec<(&str, Line, Line)> = strategies
        .iter()
        .map(|strategy| {
            let mine: Vec<&Run> = runs.iter().filter(|run| run.strategy == *strategy).collect();
            let (ok, failed) = buckets(&mine, bucket, scale);
            (*strategy, ok, failed)
        })
        .collect();
    let x_max = series
        .iter()
        .flat_map(|(_, ok, failed)| ok.iter().chain(failed).map(|(x, _)| *x))
        .fold(1.0_f64, f64::max);
    let y_max = series
        .iter()
        .flat_map(|(_, ok, failed)| ok.iter().chain(failed).map(|(_, y)| *y))
        .max()
        .unwrap_or(1)
        .max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 540)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..x_max + 1.0, 0..y_max + y_max / 10 + 1)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc("seconds since the start (unscaled)")
            .y_desc("conversations ended so far")
            .draw()
            .map_err(draw_error)?;
        for (i, (strategy, ok, failed)) in series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(ok.iter().copied(), colour.stroke_width(2)))
                .map_err(draw_error)?
                .label(format!("{strategy}: succeeded"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
            chart
                .draw_series(DashedLineSeries::new(
                    failed.iter().copied(),
                    6,
                    4,
                    colour.stroke_width(1),
                ))
                .map_err(draw_error)?
                .label(format!("{strategy}: failed or late"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(1)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(draw_error)?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// Per bucket (its end in unscaled seconds): conversations ended by then having succeeded within their deadline,
/// and the others.
fn buckets(runs: &[&Run], bucket: Duration, scale: f64) -> (Line, Line) {
    let end = |record: &super::Record| record.started + record.took;
    let last = runs
        .iter()
        .flat_map(|run| run.records.iter().map(end))
        .max()
        .unwrap_or_default();
    let count = (last.as_secs_f64() / bucket.as_secs_f64()).floor() as usize + 1;
    let (mut ok, mut failed) = (vec![0_u32; count], vec![0_u32; count]);
    for run in runs {
        for record in &run.records {
            let i = (end(record).as_secs_f64() / bucket.as_secs_f64()).floor() as usize;
            if record.outcome.succeeded && record.took <= run.deadline + DEADLINE_SLACK {
                ok[i] += 1;
            } else {
                failed[i] += 1;
            }
        }
    }
    let at = |i: usize| bucket.mul_f64(i as f64 + 1.0).as_secs_f64() / scale;
    let cumulative = |counts: Vec<u32>| -> Line {
        let mut total = 0;
        counts
            .into_iter()
            .enumerate()
            .map(|(i, n)| {
                total += n;
                (at(i), total)
            })
            .collect()
    };
    (cumulative(ok), cumulative(failed))
}

fn draw_error(error: impl std::fmt::Display) -> String {
    format!("drawing the chart: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash_sale::{Outcome, Record};

    #[test]
    fn the_chart_is_an_svg_with_a_line_per_strategy_and_outcome() {
        let run = |strategy: &str| Run {
            strategy: strategy.into(),
            seed: 1,
            records: (0..10)
                .map(|i| Record {
                    agent: i,
                    started: Duration::from_millis(100 * i as u64),
                    took: Duration::from_millis(300),
                    outcome: if i % 3 == 0 {
                        Outcome::failed(1, "model", "timeout")
                    } else {
                        Outcome::success(4)
                    },
                })
                .collect(),
            duplicates: 0,
            upstream_requests: 40,
            breaker_changes: Vec::new(),
            throttled: None,
            deadline: Duration::from_secs(1),
            time_scale: 1.0,
            outage: None,
            fleet: None,
            deferred: None,
        };
        let svg = chart_svg("flash-sale, seed 1", &[run("naive"), run("ballast")]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.contains("naive: succeeded") && svg.contains("ballast: failed or late"));
        let (ok, failed) = buckets(&[&run("x")], Duration::from_secs(1), 1.0);
        let last = |line: &Line| line.last().map_or(0, |(_, n)| *n);
        assert_eq!(
            (last(&ok), last(&failed)),
            (6, 4),
            "every conversation counted once, by the end"
        );
        assert!(
            ok.windows(2).all(|w| w[0].1 <= w[1].1),
            "so far: never decreasing"
        );
    }
}
