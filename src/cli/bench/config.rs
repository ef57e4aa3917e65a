//! `--config FILE`: a TOML file of `infeed bench` flags, expanded into the
//! command line before clap parses it.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::CommandFactory;

use super::BenchArgs;

/// The arguments of `infeed bench` alone, to parse a command line again.
#[derive(clap::Parser)]
#[command(name = "bench")]
struct BenchOnly {
    #[command(flatten)]
    args: BenchArgs,
}

/// Expands `infeed bench … --config FILE …`: the file's keys become flags,
/// except those the command line gives itself, which override them (a list
/// flag given on the command line replaces the file's list; files on the
/// command line replace the file's `inputs`). Any other command line is
/// returned as it is.
pub fn expand_config(argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    if argv.get(1).and_then(|a| a.to_str()) != Some("bench") {
        return Ok(argv);
    }
    let rest = &argv[2..];
    let mut path = None;
    for (i, arg) in rest.iter().enumerate() {
        match arg.to_str() {
            Some("--config") => path = rest.get(i + 1).cloned(),
            Some(a) if a.starts_with("--config=") => path = Some(a["--config=".len()..].into()),
            Some("--") => break,
            _ => {}
        }
    }
    let Some(path) = path else {
        return Ok(argv);
    };
    let shown = PathBuf::from(&path).display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{shown}: {e}"))?;
    let table: toml::Table = text.parse().map_err(|e| format!("{shown}: {e}"))?;
    // Whether the command line names inputs of its own (then the file's are
    // not used).
    let cli_inputs = BenchOnly::command()
        .ignore_errors(true)
        .try_get_matches_from(std::iter::once(OsString::from("bench")).chain(rest.iter().cloned()))
        .ok()
        .and_then(|m| m.get_many::<String>("inputs").map(|v| v.count() > 0))
        .unwrap_or(false);
    let command = BenchOnly::command();
    let mut tokens: Vec<OsString> = Vec::new();
    for (key, value) in &table {
        let flag = key.replace('_', "-");
        let bad = |what: &str| format!("{shown}: key {key:?}: {what}");
        if flag == "inputs" {
            if !cli_inputs {
                for v in scalars(value).map_err(|e| bad(&e))? {
                    tokens.push(v.into());
                }
            }
            continue;
        }
        let arg = command
            .get_arguments()
            .find(|a| a.get_long() == Some(flag.as_str()) && flag != "config")
            .ok_or_else(|| {
                bad("not a bench flag (keys are the flags' names, e.g. pad-to-multiple-of)")
            })?;
        let on_command_line = rest.iter().any(|a| {
            a.to_str().is_some_and(|a| {
                a.strip_prefix("--")
                    .and_then(|a| a.strip_prefix(flag.as_str()))
                    .is_some_and(|tail| tail.is_empty() || tail.starts_with('='))
            })
        });
        if on_command_line {
            continue;
        }
        let switch = matches!(arg.get_action(), clap::ArgAction::SetTrue);
        let repeated = matches!(arg.get_action(), clap::ArgAction::Append)
            && arg.get_value_delimiter().is_none();
        match value {
            toml::Value::Boolean(on) if switch => {
                if *on {
                    tokens.push(format!("--{flag}").into());
                }
            }
            _ if switch => return Err(bad("expected true or false")),
            toml::Value::Array(_) if repeated => {
                for v in scalars(value).map_err(|e| bad(&e))? {
                    tokens.push(format!("--{flag}").into());
                    tokens.push(v.into());
                }
            }
            _ => {
                tokens.push(format!("--{flag}").into());
                tokens.push(scalars(value).map_err(|e| bad(&e))?.join(",").into());
            }
        }
    }
    let mut out: Vec<OsString> = argv[..2].to_vec();
    out.extend(tokens);
    out.extend(rest.iter().cloned());
    Ok(out)
}

/// A TOML value as flag values: a scalar, or an array of scalars.
fn scalars(value: &toml::Value) -> Result<Vec<String>, String> {
    let one = |v: &toml::Value| match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        _ => Err("expected a string, number or boolean, or an array of them".to_string()),
    };
    match value {
        toml::Value::Array(items) => items.iter().map(one).collect(),
        v => one(v).map(|s| vec![s]),
    }
}
