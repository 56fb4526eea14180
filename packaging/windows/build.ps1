# gpen-watch's Windows installer: PyInstaller one-folder build (packaging/bundle/gpen-watch.spec)
# on PyTorch's CPU build, wrapped by NSIS (gpen-watch.nsi). Run from the repository root in
# PowerShell, with Python 3.10+ and NSIS (makensis) installed:
#   powershell -ExecutionPolicy Bypass -File packaging\windows\build.ps1
# Writes dist\gpen-watch-<version>-windows-x64-setup.exe. Never run by this project's CI.
$ErrorActionPreference = "Stop"
$repo = Resolve-Path (Join-Path $PSScriptRoot "..\..")
$work = Join-Path $repo "build\windows"
$version = (& py -c "import tomllib; print(tomllib.load(open(r'$repo\pyproject.toml','rb'))['project']['version'])").Trim()
if (Test-Path $work) { Remove-Item -Recurse -Force $work }
New-Item -ItemType Directory -Force -Path $work, (Join-Path $repo "dist") | Out-Null

& py -m venv "$work\venv"
$python = "$work\venv\Scripts\python.exe"
& $python -m pip install -q --index-url https://download.pytorch.org/whl/cpu torch
& $python -m pip install -q build "pyinstaller>=6.10" "resvg-cli>=0.44" "pillow>=11.3"
& $python -m build --wheel --outdir "$work\wheel" $repo
& $python -m pip install -q (Get-ChildItem "$work\wheel\*.whl").FullName

# The .ico from assets\icon.svg, beside the program's own icon inside the package data.
$env:PATH = "$work\venv\Scripts;$env:PATH"
& $python "$repo\packaging\icons.py" "$work\icons"
$data = & $python -c "import gpen_watch, pathlib; print(pathlib.Path(gpen_watch.__file__).parent / 'data')"
Copy-Item "$work\icons\gpen-watch.ico" (Join-Path $data.Trim() "gpen-watch.ico")
$env:GPEN_WATCH_ICON = "$work\icons\gpen-watch.ico"

& "$work\venv\Scripts\pyinstaller.exe" --noconfirm --distpath "$work\dist" --workpath "$work\pyinstaller" `
  "$repo\packaging\bundle\gpen-watch.spec"
Copy-Item "$repo\packaging\bundle\README-bundle.txt" "$work\dist\gpen-watch\README.txt"
Copy-Item "$repo\LICENSE" "$work\dist\gpen-watch\LICENSE"

& makensis "/DVERSION=$version" "/DDIST=$work\dist\gpen-watch" `
  "/DOUTFILE=$repo\dist\gpen-watch-$version-windows-x64-setup.exe" "$repo\packaging\windows\gpen-watch.nsi"
